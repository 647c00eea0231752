#!/usr/bin/env bash
# Installs what gmt needs on Debian 12 (as root, or with sudo) and builds
# it. Usage: scripts/setup.sh BUILD_DIR [cmake options...]
#            scripts/setup.sh --packages-only
# Skips apt when every package is already there, so it is cheap to re-run.
set -euo pipefail

build=${1:?usage: scripts/setup.sh BUILD_DIR [cmake options] | --packages-only}
shift
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(build-essential cmake pkg-config python3 clang llvm bpftool
  libnng-dev libprotobuf-c-dev protobuf-c-compiler libuv1-dev libsqlite3-dev
  libcmocka-dev libbpf-dev libelf-dev zlib1g-dev libjson-c-dev libzstd-dev clang-format
  libncurses-dev tmux) # gmt top; its test drives it in tmux

packages+=(openssl python3-yaml python3-venv python3-kubernetes) # Kubernetes: make-cert.sh; test_kubernetes.py reads the manifests, checks them against the client's models (kube_models.py) and installs kubernetes-validate in a venv

packages+=(libgrpc-dev python3-grpcio) # gmt-device-plugin: gRPC's C core; test_device_plugin.py's fake kubelet

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "gmt setup: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# A real Prometheus and promtool for test/e2e/test_prometheus.py: the
# Debian package's static binaries, unpacked into .cache/prometheus, not
# installed (installing would start a Prometheus service on this machine).
prom="$root/.cache/prometheus"
if [ ! -x "$prom/usr/bin/prometheus" ]; then
  mkdir -p "$root/.cache"
  tmp=$(mktemp -d "$root/.cache/deb.XXXXXX")
  if (cd "$tmp" && apt-get download -q prometheus >/dev/null 2>&1 &&
    dpkg-deb -x prometheus_*.deb "$tmp/x"); then
    rm -rf "$prom" && mv "$tmp/x" "$prom"
  else
    echo "gmt setup: could not fetch Debian's prometheus package (test_prometheus.py will skip)" >&2
  fi
  rm -rf "$tmp"
fi
[ "$build" = --packages-only ] && exit 0

cuda_include=${GMT_CUDA_INCLUDE:-/usr/local/cuda/include}
if [ ! -f "$cuda_include/cuda.h" ]; then
  echo "gmt setup: cuda.h not found in $cuda_include." >&2
  echo "  Install the CUDA toolkit headers (NVIDIA's cuda-toolkit, or Debian non-free's nvidia-cuda-dev)" >&2
  echo "  and set GMT_CUDA_INCLUDE to their folder." >&2
  exit 1
fi

cmake -S "$root" -B "$build" -DGMT_CUDA_INCLUDE="$cuda_include" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
