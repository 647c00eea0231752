#!/usr/bin/env bash
# Everything the GPU machine runs in one call (see scripts/gpu-bundle.sh,
# which builds .carry/ here first): the GPU check, the memory quota check,
# the hook overhead and fairness benchmarks, the tracer's exact counts on
# the real driver and its overhead benchmark (GMT_TRACE_ARGS, e.g.
# "--rounds 24 --job-cpus 2,3 --tracer-cpus 6" as in docs/BENCHMARKS.md),
# the caching pinned pool's check and benchmark, and the pin-advice
# benchmark (bench/run_pin.sh; GMT_PIN_ARGS go to it, GMT_PIN_BENCH=0 skips
# it).
# Logs go to $OUT when set. Arguments go to bench/hook_overhead.py.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
carry=${GMT_CARRY:-$root/.carry}
out=${OUT:-/tmp}
export GMT_BUILD_DIR=$carry GMT_DAEMON_LIBS=$carry/lib GMT_HOOK_LIBS=$carry/hooklib
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
rc=0
echo "== GPU check: gmt status vs what the jobs hold"
python3 "$root/test/gpu/check_gpu.py" 2>&1 | tee "$out/check_gpu.log" || rc=1
echo "== PyTorch under a memory quota"
python3 "$root/test/gpu/torch_quota.py" 2>&1 | tee "$out/torch_quota.log" || rc=1
echo "== pinned host memory of a PyTorch job"
python3 "$root/test/gpu/check_pinned.py" 2>&1 | tee "$out/check_pinned.log" || rc=1
echo "== pin advice on framework jobs (PyTorch, CuPy, JAX where installed)"
python3 "$root/test/gpu/check_pin_jobs.py" 2>&1 | tee "$out/check_pin_jobs.log" || rc=1
echo "== the caching pinned pool on the real driver"
python3 "$root/test/gpu/check_pin_pool.py" 2>&1 | tee "$out/check_pin_pool.log" || rc=1
echo "== the caching pinned pool: cuMemHostAlloc/cuMemFreeHost per round, native / no pool / pool"
python3 "$root/bench/pin_pool.py" 2>&1 | tee "$out/pin_pool.log" || rc=1
echo "== hook overhead"
python3 "$root/bench/hook_overhead.py" "$@" 2>&1 | tee "$out/hook_overhead.log" || rc=1
echo "== fairness: two jobs at REQUEST 0.3 / 0.7 (matmul fp16 sync 8, fp32 sync 10, training loop)"
python3 "$root/bench/fairness.py" ${GMT_FAIRNESS_ARGS:---suite} 2>&1 | tee "$out/fairness.log" || rc=1
echo "== the tracer on the real driver: exact counts"
python3 "$root/test/gpu/check_trace.py" 2>&1 | tee "$out/check_trace.log" || rc=1
echo "== tracer overhead"
python3 "$root/bench/trace_overhead.py" ${GMT_TRACE_ARGS:-} 2>&1 | tee "$out/trace_overhead.log" || rc=1
if [ "${GMT_PIN_BENCH:-1}" != 0 ]; then
  echo "== pin advice: the hot/cold workload per pin= mode, and a DataLoader loop (about 6-7 min)"
  OUT=$out "$root/bench/run_pin.sh" ${GMT_PIN_ARGS:-} || rc=1
fi
exit $rc
