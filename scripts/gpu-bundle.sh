#!/usr/bin/env bash
# Builds what the GPU machine needs into one folder that git ignores
# (default .carry/): a Release build, the CUDA-runtime check program built
# with nvcc, and the Debian shared libraries the programs need that a bare
# machine lacks. Then, there:
#   GMT_BUILD_DIR=$PWD/.carry GMT_DAEMON_LIBS=$PWD/.carry/lib GMT_HOOK_LIBS=$PWD/.carry/hooklib \
#     python3 test/gpu/check_gpu.py
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/.carry}
"$root/scripts/setup.sh" "$out" -DCMAKE_BUILD_TYPE=Release
mkdir -p "$out/gpu" "$out/lib"
/usr/local/cuda/bin/nvcc -O2 -gencode arch=compute_90,code=sm_90 \
  -gencode arch=compute_90,code=compute_90 -o "$out/gpu/rt_job" "$root/test/gpu/rt_job.cu"
# mode=um's moves natively (bench/run_tiers.sh): driver API only.
/usr/local/cuda/bin/nvcc -O2 -o "$out/gpu/um_prefetch" "$root/bench/um_prefetch.c" \
  -L/usr/local/cuda/lib64/stubs -lcuda
# What a latency request beside batch work waits at best, with no gmt
# (bench/handoff_floor.cu).
/usr/local/cuda/bin/nvcc -O2 -gencode arch=compute_90,code=sm_90 \
  -o "$out/gpu/handoff_floor" "$root/bench/handoff_floor.cu"
# What a new pinned host copy costs, by way of getting it (bench/pin_cost.c).
/usr/local/cuda/bin/nvcc -O2 -o "$out/gpu/pin_cost" "$root/bench/pin_cost.c" \
  -L/usr/local/cuda/lib64/stubs -lcuda

# The libraries our programs load, less glibc's own and the driver: lib/
# for the daemons and the CLI, hooklib/ for the hook alone (a CUDA program
# gets only these, so that its own libraries are not shadowed).
deps() {
  for bin in "$@"; do ldd "$bin" | awk '/=> \//{print $3}'; done | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda)\.so'
}
mkdir -p "$out/hooklib"
deps "$out/server/gmt-schd" "$out/client/gmt-pmgr" "$out/client/gmt" |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
deps "$out/hook/libgmthook.so" | while read -r lib; do cp -L "$lib" "$out/hooklib/"; done
# The benchmarks' programs that the GPU machine runs from the build tree.
for prog in bench/hook_overhead bench/copy_job bench/pin_workload bench/pin_pool \
    test/e2e/memprogs/host_pool test/e2e/memprogs/host_pins test/e2e/memprogs/swap_job; do
  [ -x "$out/$prog" ] || { echo "gpu-bundle: $out/$prog was not built" >&2; exit 1; }
done
# Keep only what the GPU machine runs: the build tree's objects are large.
find "$out" -name '*.o' -delete
du -sh "$out"
ls "$out/lib" "$out/hooklib"
