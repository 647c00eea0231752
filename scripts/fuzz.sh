#!/usr/bin/env bash
# Builds the libFuzzer targets of test/fuzz (clang, ASan+UBSan, in its own
# build folder) and runs each for a bounded time on a scratch copy of its
# seed corpus, so the committed corpus never grows.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# SECONDS per target: the argument, else $GMT_FUZZ_SECONDS, else 60; 0
# skips the run. Prints each target's executions (libFuzzer's
# stat::number_of_executed_units) and exits 1 if any target found a crash,
# a leak, a timeout or ran past the memory limit; what it found is kept in
# BUILD/crashes/<target>/ (run the target on that file to reproduce).
# scripts/test.sh ends with this run; bench/fuzz-long.sh is the long one.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-${GMT_FUZZ_SECONDS:-60}}
shift || true
build=${GMT_FUZZ_BUILD:-$root/build-fuzz}
targets=("$@")
((${#targets[@]})) || targets=(fuzz_envelope fuzz_config fuzz_dump fuzz_webhook fuzz_http_head)

if ! [[ $secs =~ ^[0-9]+$ ]]; then
  echo "fuzz: SECONDS must be a whole number, not '$secs'" >&2
  exit 2
fi
if [ "$secs" -eq 0 ]; then
  echo "fuzz: 0 seconds: skipped"
  exit 0
fi
if ! command -v clang >/dev/null; then
  echo "fuzz: clang not found (Debian: apt-get install clang; scripts/setup.sh --packages-only)" >&2
  exit 2
fi

echo "== fuzz: ${#targets[@]} target(s), ${secs} s each (ASan+UBSan, clang)"
CC=clang cmake -S "$root" -B "$build" -DGMT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGMT_CUDA_INCLUDE="${GMT_CUDA_INCLUDE:-/usr/local/cuda/include}" >/dev/null
known=$(cmake --build "$build" --target help)
for t in "${targets[@]}"; do
  if ! grep -qw "$t" <<<"$known"; then
    # fuzz_dump needs bpf/'s tracer, which needs kernel BTF to build.
    echo "fuzz: $t cannot be built here (see the cmake warnings of $build)" >&2
    exit 1
  fi
done
cmake --build "$build" -j "${GMT_JOBS:-$(nproc)}" --target "${targets[@]}"

work=$(mktemp -d "${TMPDIR:-/tmp}/gmt-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=()
for t in "${targets[@]}"; do
  seeds=$root/test/fuzz/corpus/${t#fuzz_}
  mkdir -p "$work/$t/corpus" "$work/$t/found"
  cp -r "$seeds/." "$work/$t/corpus/"
  rc=0
  # -timeout: one input taking longer is a hang, and a finding.
  "$build/test/fuzz/$t" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$work/$t/found/" "$work/$t/corpus" \
    >"$work/$t/log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log" | tail -1)
  units=$(find "$work/$t/corpus" -type f | wc -l)
  if [ "$rc" -ne 0 ]; then
    failed+=("$t")
    mkdir -p "$build/crashes/$t"
    cp "$work/$t/found/"* "$build/crashes/$t/" 2>/dev/null || true
    cp "$work/$t/log" "$build/crashes/$t/log"
    tail -n 40 "$work/$t/log" >&2
    echo "fuzz: $t FAILED (exit $rc) after ${execs:-?} executions; input and log in $build/crashes/$t/" >&2
  else
    echo "fuzz: $t: ${execs:-?} executions in ${secs} s, corpus $(find "$seeds" -type f | wc -l) -> $units inputs, no crash"
  fi
done
((${#failed[@]} == 0)) || {
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
}
