#!/usr/bin/env bash
# The test command: installs what is missing, builds with ASan+UBSan and
# -Werror, and runs every unit and end-to-end test (fake driver, no GPU).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${GMT_TEST_BUILD:-$root/build-test}

"$root/scripts/setup.sh" "$build" -DCMAKE_BUILD_TYPE=Debug -DGMT_SANITIZE=ON -DGMT_WERROR=ON
cd "$build"
ctest --output-on-failure --timeout 600 "$@"
