#!/usr/bin/env bash
# The pin-advice benchmark on the GPU machine (bench/pin_advice.py), bounded
# to fit a GPU session: sizes 1-64 MiB 3 times each and 256 MiB once in
# every mode (about 4 minutes on an H200 by DESIGN.md's copy rates), then
# the PyTorch DataLoader loop once per variant (about 1.5 minutes). No run
# starts after GMT_PIN_BUDGET_S seconds (default 390), and the whole is
# killed after GMT_PIN_TIMEOUT_S (default 540). Writes $OUT/pin_advice.json
# and $OUT/pin_advice.log (OUT defaults to /tmp); draw the JSON here with
#   bench/pin_plot.py pin_advice.json docs/img
# Arguments go to pin_advice.py after these defaults (the last wins), e.g.
#   bench/run_pin.sh --sizes 1,16 --reps 1      a quick look
# test/gpu/run.sh calls this (GMT_PIN_BENCH=0 there skips it).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
carry=${GMT_CARRY:-$root/.carry}
out=${OUT:-/tmp}
export GMT_BUILD_DIR=${GMT_BUILD_DIR:-$carry} GMT_DAEMON_LIBS=${GMT_DAEMON_LIBS:-$carry/lib}
export GMT_HOOK_LIBS=${GMT_HOOK_LIBS:-$carry/hooklib}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

timeout -k 10 "${GMT_PIN_TIMEOUT_S:-540}" python3 "$root/bench/pin_advice.py" \
  --sizes 1,4,16,64,256 --reps 3 --big-mib 256 --big-reps 1 \
  --budget-s "${GMT_PIN_BUDGET_S:-390}" --dataloader --dl-reps 1 \
  --out "$out/pin_advice.json" "$@" 2>&1 | tee "$out/pin_advice.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 124 ] && echo "pin advice: killed after ${GMT_PIN_TIMEOUT_S:-540} s (no JSON written)"
exit "$rc"
