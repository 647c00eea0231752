#!/usr/bin/env bash
# Memory tiers on the GPU machine (issue 12; docs/BENCHMARKS.md), in one
# call after scripts/gpu-bundle.sh built .carry/ here: the byte-exact checks
# of mode=swap and mode=um on the real driver, then side by side in the same
# run the two modes' move bandwidth against pinned copies and the PyTorch
# pair at 1.5x the declared capacity. Logs go to $OUT when set.
#   GMT_TIERS_SIZES  bench/swap_bw.py's --sizes (default 256,1024,4096)
#   GMT_TIERS_STEPS  check_swap_torch.py's --steps (default 3000)
#   GMT_TIERS_QUANTA check_swap_torch.py's --quanta (default 300)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
carry=${GMT_CARRY:-$root/.carry}
out=${OUT:-/tmp}
export GMT_BUILD_DIR=$carry GMT_DAEMON_LIBS=$carry/lib GMT_HOOK_LIBS=$carry/hooklib
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
rc=0
for mode in swap um; do
  echo "== mode=$mode: byte-exact on the real driver"
  python3 "$root/test/gpu/check_$mode.py" 2>&1 | tail -n 15 | tee "$out/check_$mode.log" || rc=1
done
for mode in swap um; do
  echo "== mode=$mode: moves against pinned copies"
  python3 "$root/bench/swap_bw.py" --mode $mode --sizes "${GMT_TIERS_SIZES:-256,1024,4096}" \
    --rounds 2 2>&1 | tee "$out/swap_bw_$mode.log" || rc=1
done
echo "== managed memory's prefetches natively (what mode=um's moves cost without gmt)"
"$carry/gpu/um_prefetch" 2>&1 | tee "$out/um_prefetch.log" || rc=1
for mode in swap um; do
  echo "== mode=$mode: two PyTorch jobs at 1.5x the declared capacity"
  python3 "$root/test/gpu/check_swap_torch.py" --mode $mode --steps "${GMT_TIERS_STEPS:-3000}" \
    --quanta "${GMT_TIERS_QUANTA:-300}" 2>&1 | tee "$out/torch_$mode.log" | tail -n 12 || rc=1
done
exit $rc
