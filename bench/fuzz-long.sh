#!/usr/bin/env bash
# The long fuzz run: scripts/fuzz.sh with SECONDS per target (default 1800,
# half an hour each), for a machine that can spare it. CI runs the same
# targets for a minute each. Record the executions it prints, with date and
# build, in docs/fuzzing.md ("Runs").
#   bench/fuzz-long.sh [SECONDS] [TARGET...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-1800}
shift || true
exec "$root/scripts/fuzz.sh" "$secs" "$@"
