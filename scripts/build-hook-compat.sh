#!/usr/bin/env bash
# Builds libgmthook.so in a Debian 11 (bullseye) userland, against its glibc
# 2.31, so that it loads in application images as old as Debian 11 and
# Ubuntu 20.04 (a hook built here needs glibc 2.34: ld.so refuses the preload
# there and the job runs unhooked). The libraries it needs that an image may
# lack (bullseye's libnng and libprotobuf-c) go beside it, where its $ORIGIN
# RPATH finds them first: the folder is what an image's hook folder holds
# (docs/kubernetes.md).
#
# Then it checks: nothing in the folder needs a glibc newer than 2.31; the
# hook loads into a program in the bullseye userland; and, on this machine,
# a job under it is counted by gmt-schd on the fake driver
# (test/e2e/compat_hook_check.py).
#
# usage: scripts/build-hook-compat.sh [OUT]     (default build-compat/hook)
# Root (debootstrap, chroot); the first run fetches bullseye from Debian's
# archive into .cache/bullseye (about 300 MB, a minute). GMT_BUILD_DIR names
# the build of the daemons for the last check (default build-test, then build).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build-compat/hook}
chroot_dir=${GMT_COMPAT_ROOT:-$root/.cache/bullseye}
max_glibc=2.31

if [ "$(id -u)" != 0 ]; then
  echo "build-hook-compat.sh: needs root (debootstrap, chroot)" >&2
  exit 2
fi
command -v debootstrap > /dev/null || apt-get install -y -qq debootstrap > /dev/null
if [ ! -x "$chroot_dir/bin/true" ]; then
  echo "== bullseye userland into $chroot_dir"
  rm -rf "$chroot_dir"
  timeout 900 debootstrap --variant=minbase bullseye "$chroot_dir" http://deb.debian.org/debian \
    > "$chroot_dir.log" 2>&1 || { tail -20 "$chroot_dir.log" >&2; exit 1; }
fi
echo "== build tools in it"
timeout 900 chroot "$chroot_dir" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends gcc make cmake pkg-config libc6-dev \
  libnng-dev libprotobuf-c-dev protobuf-c-compiler > /dev/null"

echo "== the hook, built there"
rm -rf "$chroot_dir/src" "$chroot_dir/cuda-include"
mkdir -p "$chroot_dir/src"
cp -r "$root/CMakeLists.txt" "$root/proto" "$root/topo" "$root/hook" "$chroot_dir/src/"
cp -r /usr/local/cuda/include "$chroot_dir/cuda-include"
chroot "$chroot_dir" bash -c "cd /src && cmake -S . -B build -DGMT_HOOK_ONLY=ON \
  -DGMT_CUDA_INCLUDE=/cuda-include -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGMT_WERROR=ON > /dev/null &&
  make -C build -j\"$(nproc)\" gmthook > /dev/null"

rm -rf "$out"
mkdir -p "$out"
cp "$chroot_dir/src/build/hook/libgmthook.so" "$out/"
# What it links beyond glibc, from the same userland.
chroot "$chroot_dir" ldd /src/build/hook/libgmthook.so | awk '/=> \//{print $3}' |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$chroot_dir$lib" "$out/"; done

echo "== checks"
newest=$(for f in "$out"/*.so*; do objdump -T "$f" | grep -oE 'GLIBC_[0-9.]+' | sed 's/GLIBC_//'; done |
  sort -V | tail -1)
echo "newest glibc symbol version needed: $newest (at most $max_glibc)"
if [ "$(printf '%s\n%s\n' "$newest" "$max_glibc" | sort -V | tail -1)" != "$max_glibc" ]; then
  echo "build-hook-compat.sh: the folder needs glibc $newest, past $max_glibc" >&2
  exit 1
fi
rm -rf "$chroot_dir/gmt-hook"
cp -r "$out" "$chroot_dir/gmt-hook"
chroot "$chroot_dir" env LD_PRELOAD=/gmt-hook/libgmthook.so /bin/true
echo "loads in bullseye (glibc $(chroot "$chroot_dir" ldd --version | head -1 | awk '{print $NF}'))"
python3 "$root/test/e2e/compat_hook_check.py" "$out"
echo "$out: libgmthook.so for glibc >= $max_glibc, with $(ls "$out" | grep -vc libgmthook) libraries beside it"
