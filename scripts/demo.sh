#!/usr/bin/env bash
# The main job: installs and builds gmt, then starts gmt-schd with an
# example config, two pod managers, two sample jobs under the hook, and
# shows `gmt status` while they run. Uses the GPU when one is present,
# otherwise the fake driver (said clearly: SIMULATED).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${GMT_BUILD:-$root/build}
"$root/scripts/setup.sh" "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo

tmp=$(mktemp -d /tmp/gmt-demo-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

if nvidia-smi -L >/dev/null 2>&1; then
  mode="GPU: $(nvidia-smi -L | head -1)"
  export GMT_REAL_LIBCUDA=libcuda.so.1
  job_args=(--seconds 4 --mib 512 --kernel-us 2000)
else
  mode="SIMULATED: no GPU here, the jobs run on gmt's fake driver (test/fakecuda)"
  export LD_LIBRARY_PATH="$build/test/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export GMT_FAKE_DIR="$tmp" GMT_FAKE_MEM=16Gi
  job_args=(--seconds 4 --mib 512 --kernel-us 2000)
fi
echo "== gmt demo ($mode)"

cat >"$tmp/resource-config.txt" <<CFG
2
train 0.3 1.0 4Gi
infer 0.7 1.0 2Gi
CFG
echo "== resource-config.txt"; cat "$tmp/resource-config.txt"

schd_url="tcp://127.0.0.1:$(free_port)"
"$build/server/gmt-schd" -c "$tmp/resource-config.txt" --listen "$schd_url" \
  --listen "ipc://$tmp/schd.sock" --state-dir "$tmp/state" 2>"$tmp/schd.log" &
pids+=($!)
gmt() { "$build/client/gmt" --schd "$schd_url" "$@"; }
for _ in $(seq 100); do gmt status >/dev/null 2>&1 && break; sleep 0.1; done
gmt status >/dev/null || { echo "gmt-schd did not start:"; cat "$tmp/schd.log"; exit 1; }

declare -A pmgr_url
for pod in train infer; do
  port=$(free_port)
  "$build/client/gmt-pmgr" --port "$port" --name "$pod" --schd "ipc://$tmp/schd.sock" \
    --ipc "$tmp/pmgr-$pod.sock" 2>"$tmp/pmgr-$pod.log" &
  pids+=($!)
  # The ipc socket: the kernel names each process that calls on it.
  pmgr_url[$pod]="ipc://$tmp/pmgr-$pod.sock"
done
for _ in $(seq 100); do
  [ "$(gmt status --json | python3 -c 'import json,sys; print(sum(p["connected"] for p in json.load(sys.stdin)["pods"]))')" = 2 ] && break
  sleep 0.1
done

echo "== two sample jobs under the hook"
jobs_pids=()
for pod in train infer; do
  GMT_FAIL_CLOSED=1 GMT_PMGR=${pmgr_url[$pod]} LD_PRELOAD="$build/hook/libgmthook.so" \
    "$build/test/e2e/progs/sample_job" "${job_args[@]}" &
  jobs_pids+=($!)
done
sleep 2
echo "== gmt status (while the jobs run)"
gmt status
echo "== gmt status --json"
gmt status --json
echo
rc=0
for p in "${jobs_pids[@]}"; do wait "$p" || rc=1; done
# The pod managers see the exits at once; give their heartbeats a moment.
for _ in $(seq 30); do
  [ "$(gmt status --json | python3 -c 'import json,sys; print(sum(len(p["processes"]) for p in json.load(sys.stdin)["pods"]))')" = 0 ] && break
  sleep 0.1
done
echo "== gmt status (after the jobs ended)"
gmt status
exit $rc
