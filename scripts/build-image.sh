#!/usr/bin/env bash
# Builds gmt's OCI image from Debian packages only: a Debian 12 (bookworm)
# root file system made by mmdebstrap from Debian's archive, holding the
# runtime libraries gmt's programs link (found with ldd, named by dpkg) and
# nothing else but Debian's Essential set (coreutils' cp for the webhook's
# init container, a shell), then gmt's build added and `podman import`ed.
#
#   /usr/local/bin/   gmt-schd gmt-pmgr gmt gmt-probe gmt-webhook
#                     (and gmt-device-plugin when the source has it)
#   /usr/local/lib/gmt/  the hook folder the webhook copies into each gmt pod
#                     (--hook-path, deploy/kubernetes/webhook.yaml):
#                     libgmthook.so and the libraries it needs, found through
#                     its $ORIGIN RPATH, built for glibc 2.31 by
#                     scripts/build-hook-compat.sh (Debian 11 and up)
#
# usage: scripts/build-image.sh [--tag NAME] [--source head|worktree]
#          [--hook DIR] [--output FILE] [--work DIR] [--refresh]
#   --tag      the image's name (default gmt:latest, the manifests' name;
#              podman stores it as localhost/gmt:latest); it is also tagged
#              NAME-without-tag:COMMIT (12 hex digits)
#   --source   head (default): the committed HEAD, exported with git
#              archive, so that the image is what its revision label says;
#              worktree: the files of the working tree git does not ignore
#   --hook DIR a hook folder already built (holding libgmthook.so), used as
#              it is; by default build-hook-compat.sh builds one, reused on
#              the next run while the hook's sources are unchanged
#   --output FILE  also writes the image as an OCI archive (podman save
#              --format oci-archive), for `ctr images import` or a registry
#   --work DIR the build's folder (default build-img): source copy (src),
#              Release build (build), hook folder (hook-compat), the cached
#              root file system (rootfs-base-*), logs
#   --refresh  fetches the Debian packages again (security updates) instead
#              of reusing the cached root file system
#
# Root (mmdebstrap, chroot, podman). Installs mmdebstrap, podman and rsync
# when missing. The first run builds gmt (about 3 minutes on 2 cores), the
# Debian 11 hook (about 3 minutes: debootstrap and a build there, in
# .cache/bullseye) and fetches bookworm's packages (about 1 minute); a
# second run with nothing changed takes well under a minute.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tag=gmt:latest
src_mode="head"
hook=""
output=""
work=$root/build-img
refresh=0
suite=bookworm
mirror=${GMT_DEBIAN_MIRROR:-http://deb.debian.org/debian}

die() {
  echo "build-image.sh: $*" >&2
  exit 1
}
usage() { # usage CODE: the usage text, on stderr unless CODE is 0
  if [ "$1" = 0 ]; then
    sed -n '/^# usage:/,/^# Root/p' "$0" | sed 's/^# \{0,1\}//' | grep -v '^Root'
  else
    sed -n '/^# usage:/,/^# Root/p' "$0" | sed 's/^# \{0,1\}//' | grep -v '^Root' >&2
  fi
  exit "$1"
}
while (($#)); do
  case $1 in
    --tag) tag=${2:?--tag needs a name} && shift ;;
    --source) src_mode=${2:?--source needs head or worktree} && shift ;;
    --hook) hook=${2:?--hook needs a folder} && shift ;;
    --output) output=${2:?--output needs a file} && shift ;;
    --work) work=${2:?--work needs a folder} && shift ;;
    --refresh) refresh=1 ;;
    -h | --help) usage 0 ;;
    *) echo "build-image.sh: unknown argument '$1'" >&2 && usage 2 ;;
  esac
  shift
done
case $src_mode in head | worktree) ;; *) die "--source is head or worktree, not '$src_mode'" ;; esac
[[ $tag == *:* ]] || tag=$tag:latest
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap, chroot, podman)"
if [ -n "$hook" ]; then
  [ -d "$hook" ] || die "--hook: no folder '$hook'"
  hook=$(cd "$hook" && pwd)
  [ -f "$hook/libgmthook.so" ] || die "--hook: $hook holds no libgmthook.so"
fi
[ -z "$output" ] || output=$(realpath -m "$output")
mkdir -p "$work"
work=$(cd "$work" && pwd)

step_start=$SECONDS
step() {
  echo "== $* ($((SECONDS - step_start)) s so far)"
}

missing=()
for t in mmdebstrap:mmdebstrap podman:podman rsync:rsync git:git cmake:cmake; do
  command -v "${t%%:*}" > /dev/null || missing+=("${t#*:}")
done
if ((${#missing[@]})); then
  step "installing ${missing[*]}"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null ||
    die "could not install ${missing[*]} (apt-get update first?)"
fi

# 1. The source: copied into $work/src with checksums, so that an unchanged
# file keeps its time and the build stays incremental.
step "source ($src_mode)"
cd "$root"
commit=$(git rev-parse HEAD)
stage=$(mktemp -d "$work/stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
if [ "$src_mode" = head ]; then
  git archive HEAD | tar -x -C "$stage"
  revision=$commit
else
  git ls-files -z -co --exclude-standard |
    rsync -a --from0 --files-from=- --ignore-missing-args "$root/" "$stage/"
  revision="$commit+worktree"
fi
mkdir -p "$work/src"
rsync -rlpc --delete "$stage/" "$work/src/"
rm -rf "$stage"
src=$work/src

# 2. gmt, Release. The fake driver and dev_alloc are for the hook's check
# (compat_hook_check.py) and test/image/check_image.py, not the image.
step "build (Release) in $work/build"
build=$work/build
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DGMT_CUDA_INCLUDE="${GMT_CUDA_INCLUDE:-/usr/local/cuda/include}" > "$work/cmake.log" 2>&1 ||
  { tail -30 "$work/cmake.log" >&2; die "cmake failed (log: $work/cmake.log)"; }
progs=(server/gmt-schd client/gmt-pmgr client/gmt server/gmt-probe deploy/webhook/gmt-webhook)
targets=(gmt-schd gmt-pmgr gmt gmt-probe gmt-webhook fakecuda fakenvml dev_alloc)
if cmake --build "$build" --target help | grep -c '\bgmt-device-plugin\b' > /dev/null; then
  progs+=(deploy/device-plugin/gmt-device-plugin)
  targets+=(gmt-device-plugin)
fi
timeout 1800 cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" > "$work/build.log" 2>&1 ||
  { grep -E 'error|Error' "$work/build.log" | head -20 >&2; die "the build failed (log: $work/build.log)"; }

# 3. The hook folder, for glibc 2.31 and up.
if [ -z "$hook" ]; then
  # What build-hook-compat.sh builds from: reuse its folder while these
  # are unchanged.
  hook_sum=$(cd "$src" && find CMakeLists.txt proto topo hook scripts/build-hook-compat.sh -type f -print0 |
    sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
  hook=$work/hook-compat
  if [ -f "$hook/libgmthook.so" ] && [ "$(cat "$hook/.sources" 2> /dev/null)" = "$hook_sum" ]; then
    step "hook folder: reusing $hook (its sources unchanged)"
  else
    step "hook folder for glibc 2.31 (scripts/build-hook-compat.sh)"
    rm -rf "$hook"
    GMT_COMPAT_ROOT=${GMT_COMPAT_ROOT:-$root/.cache/bullseye} GMT_BUILD_DIR=$build \
      "$src/scripts/build-hook-compat.sh" "$hook" > "$work/hook.log" 2>&1 ||
      { tail -30 "$work/hook.log" >&2; die "build-hook-compat.sh failed (log: $work/hook.log)"; }
    echo "$hook_sum" > "$hook/.sources"
  fi
fi
hook_glibc=$(for f in "$hook"/*.so*; do objdump -T "$f" | grep -oE 'GLIBC_[0-9.]+' | sed 's/GLIBC_//'; done |
  sort -V | tail -1)
echo "hook folder $hook: $(for f in "$hook"/*.so*; do printf '%s ' "${f##*/}"; done)(newest glibc symbol $hook_glibc)"

# 4. The root file system: Debian's Essential set and the packages holding
# what the programs link, as this (bookworm) machine's dpkg names them.
step "packages the programs need"
# shellcheck disable=SC1091
[ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = "$suite" ] ||
  die "the programs are built here and must run on $suite: this machine is not Debian $suite"
for p in "${progs[@]}"; do
  [ -x "$build/$p" ] || die "$build/$p was not built"
done
mapfile -t libs < <(for p in "${progs[@]}"; do ldd "$build/$p"; done | awk '/=> \//{print $3}' | sort -u)
# dpkg names a file by its package's path, /lib/... or /usr/lib/...: ask
# for both forms in one call (a call costs about a second).
found=$(for lib in "${libs[@]}"; do
  alt=${lib#/usr}
  [ "$alt" != "$lib" ] || alt=/usr$lib
  printf '%s\n%s\n' "$lib" "$alt"
done | xargs dpkg -S 2> /dev/null || true)
pkgs=()
for lib in "${libs[@]}"; do
  line=$(awk -v a="${lib#/usr}" -v b="/usr${lib#/usr}" '$NF == a || $NF == b' <<< "$found" | head -1)
  [ -n "$line" ] || die "no Debian package holds $lib"
  pkgs+=("${line%%:*}")
done
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | grep -vx 'libc6' | sort -u)
echo "${pkgs[*]}"

key=$(printf '%s\n' "$suite" "$mirror" merged-usr "${pkgs[@]}" | sha256sum | cut -c1-16)
base=$work/rootfs-base-$key
if [ "$refresh" = 1 ] || [ ! -x "$base/bin/cp" ]; then
  step "root file system: mmdebstrap $suite from $mirror (about a minute)"
  rm -rf "$base" "$base.new"
  # merged /usr the way debootstrap and Debian's own images make it: the
  # usrmerge package would bring perl (50 MB) into the image.
  timeout 900 mmdebstrap --variant=essential --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --include="$(
    IFS=,
    echo "${pkgs[*]}"
  )" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "$suite" "$base.new" "$mirror" > "$work/mmdebstrap.log" 2>&1 ||
    { tail -20 "$work/mmdebstrap.log" >&2; die "mmdebstrap failed (log: $work/mmdebstrap.log)"; }
  mv "$base.new" "$base"
  # Bases of other package lists are left over from earlier builds.
  find "$work" -maxdepth 1 -name 'rootfs-base-*' ! -name "rootfs-base-$key" -exec rm -rf {} +
else
  step "root file system: reusing $base (Debian packages of $(date -r "$base/var/lib/dpkg/status" +%F); --refresh fetches them again)"
fi

# 5. gmt into it, then checks in it.
step "gmt into the root file system"
rootfs=$work/rootfs
rm -rf "$rootfs"
cp -a "$base" "$rootfs"
for p in "${progs[@]}"; do
  install -m 0755 "$build/$p" "$rootfs/usr/local/bin/"
done
strip --strip-unneeded "$rootfs"/usr/local/bin/gmt*
install -d -m 0755 "$rootfs/usr/local/lib/gmt" "$rootfs/run/gmt" "$rootfs/var/lib/gmt"
cp -L "$hook"/*.so* "$rootfs/usr/local/lib/gmt/"
chmod 0644 "$rootfs"/usr/local/lib/gmt/*
# Its debug sections stay in the build's folder: each gmt pod gets a copy.
strip --strip-debug "$rootfs/usr/local/lib/gmt/libgmthook.so"
for p in "${progs[@]}"; do
  name=$(basename "$p")
  if chroot "$rootfs" ldd "/usr/local/bin/$name" | grep -q 'not found'; then
    chroot "$rootfs" ldd "/usr/local/bin/$name" | grep 'not found' >&2
    die "$name lacks libraries in the image"
  fi
  chroot "$rootfs" "/usr/local/bin/$name" --help > /dev/null 2>&1 ||
    die "$name --help fails in the image"
done
# Every library the hook needs beyond glibc comes from its own folder
# ($ORIGIN), not from the image's packages: an application image has none.
outside=$(chroot "$rootfs" ldd /usr/local/lib/gmt/libgmthook.so | awk '/=> \//{print $3}' |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' | grep -v '^/usr/local/lib/gmt/' || true)
[ -z "$outside" ] || die "the hook loads these from outside its folder: $outside"
chroot "$rootfs" env LD_PRELOAD=/usr/local/lib/gmt/libgmthook.so /bin/true ||
  die "the hook does not preload in the image"

# 6. The image.
step "podman import as $tag"
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
old=$(podman image inspect --format '{{.Id}}' "$tag" 2> /dev/null || true)
tar -C "$rootfs" --numeric-owner -cf "$work/rootfs.tar" .
id=$(podman import --quiet \
  --change 'CMD ["gmt", "--help"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'WORKDIR /' \
  --change "LABEL org.opencontainers.image.title=gmt" \
  --change "LABEL org.opencontainers.image.description=gmt-schd, gmt-pmgr, gmt, gmt-probe, gmt-webhook and the hook folder /usr/local/lib/gmt" \
  --change "LABEL org.opencontainers.image.revision=$revision" \
  --change "LABEL org.opencontainers.image.created=$created" \
  --change "LABEL org.opencontainers.image.base.name=debian:$suite" \
  --change "LABEL io.gmt.hook.path=/usr/local/lib/gmt" \
  --change "LABEL io.gmt.hook.glibc=$hook_glibc" \
  --message "gmt $revision" \
  "$work/rootfs.tar" "$tag")
id=${id#sha256:}
rm -rf "$work/rootfs.tar" "$rootfs"
podman tag "$id" "${tag%:*}:${commit:0:12}"
if [ -n "$old" ] && [ "$old" != "$id" ] && [ -z "$(podman image inspect --format '{{.RepoTags}}' "$old" | tr -d '[]')" ]; then
  podman rmi "$old" > /dev/null # the previous build of this tag, now untagged
fi
size=$(podman image inspect --format '{{.Size}}' "$id")
if [ -n "$output" ]; then
  step "podman save --format oci-archive -o $output"
  rm -f "$output"
  podman save --quiet --format oci-archive -o "$output" "$tag"
fi
echo "== $tag (${id:0:12}, $((size / 1048576)) MiB, revision $revision) in $((SECONDS - step_start)) s"
[ -z "$output" ] || echo "   $output: $(($(stat -c %s "$output") / 1048576)) MiB"
