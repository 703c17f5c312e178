#!/usr/bin/env bash
# .ci/trixie.sh: build and test optrace against Debian trixie's packages (libtorch 2.x,
# simdjson 3.12, Catch2 v3) in a debootstrap chroot kept between runs outside the clone.
#
# Exit status: 0 passed; 1 the build or a test failed; 75 the chroot could not be made or
# updated (no archive reachable, no root, no debootstrap): the caller reports it and goes on.
#
# Environment: OPTRACE_CI_CACHE (default /var/cache/optrace-ci) holds the chroot `trixie/`;
# OPTRACE_BUILD_DIR (default build-trixie) is the build folder inside the clone;
# OPTRACE_TEST_EXCLUDE (a ctest -E regex) leaves tests out (.ci/run: one bookworm runs);
# OPTRACE_CMAKE_ARGS is passed to the test build (.ci/run: warnings as errors, the benchmarks'
# compile check).
#
# Usage: bash .ci/trixie.sh            the README's test command in the chroot
#        bash .ci/trixie.sh --prepare  make or update the chroot only
#        bash .ci/trixie.sh --run CMD  run CMD (bash -c) in the chroot, in the source tree
set -euo pipefail

action=test
case "${1:-}" in
  "") ;;
  --prepare) action=prepare ;;
  --run) action=run; shift; command_line="$*" ;;
  *) echo "usage: bash .ci/trixie.sh [--prepare | --run CMD]" >&2; exit 2 ;;
esac

src=$(cd "$(dirname "$0")/.." && pwd -P)
cache=${OPTRACE_CI_CACHE:-/var/cache/optrace-ci}
suite=trixie
root=$cache/$suite
build=${OPTRACE_BUILD_DIR:-build-trixie}
# What dev.sh needs, so that it installs nothing at test time. python3-torch lets the
# interoperability tests compare with torch 2.x's Python side; python3-torchvision gives them
# real architectures (no weights are downloaded).
# The profiler's consumer tests run HTA and Chakra (../shared/consumers/README.md lists what they
# import; protobuf-compiler makes Chakra's protobuf module). libgloo-dev: gloo's headers, which
# c10d's gloo backend includes (the 2-rank distributed test). valgrind: the CLI's growth test.
# chromium-headless-shell: the browser that renders summary --by rank's report page in its tests.
packages=(cmake ninja-build g++ libtorch-dev libsimdjson-dev zlib1g-dev catch2 python3-torch python3-torchvision
          python3-pandas python3-numpy python3-plotly python3-networkx python3-psutil python3-pydot
          python3-protobuf protobuf-compiler python3-yaml python3-setuptools libgloo-dev valgrind
          chromium-headless-shell)

unavailable() { echo "trixie: $*" >&2; exit 75; }

[ "$(id -u)" -eq 0 ] || unavailable "needs root (debootstrap, chroot, mount)"
command -v debootstrap >/dev/null || unavailable "debootstrap is not installed"

# The Debian archive the machine's apt uses: the first URI of a non-security source, from
# deb822 .sources files or one-line .list files.
mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/ && $i ~ /^https?:/) { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { if ($i !~ /security/) print $i; break } }' "$f"
  done
}
url=$(mirror | head -n 1)
[ -n "$url" ] || unavailable "found no Debian archive in /etc/apt/sources*"

mkdir -p "$cache"
# One run at a time uses the chroot: its /proc, /dev and source mounts are per run.
exec 9>"$cache/$suite.lock"
flock 9

# Mounts left by a run that was killed hard: unmount them before anything removes files.
stale() { awk -v r="$root" '$2 == r || index($2, r "/") == 1 || index($2, r ".new/") == 1 { print $2 }' /proc/self/mounts | sort -r; }
for m in $(stale); do umount "$m" 2>/dev/null || umount -l "$m" || unavailable "cannot unmount $m"; done

want="suite=$suite mirror=$url packages=${packages[*]}"
stamp=.optrace-ci-ready

in_root() { # in_root ROOT CMD...: run CMD in the chroot with a clean environment
  local r=$1; shift
  chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive "$@"
}

mounts=()
unmount_all() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null ||
      echo "trixie: could not unmount ${mounts[i]}" >&2
  done
  mounts=()
}
trap unmount_all EXIT
trap 'exit 130' INT TERM
mount_in() { # mount_in ROOT TARGET MOUNT-ARGS...
  local target=$1$2; shift 2
  mkdir -p "$target"
  mount "$@" "$target"
  mounts+=("$target")
}
mount_system() {
  mount_in "$1" /proc -t proc proc
  mount_in "$1" /sys -t sysfs -o ro sysfs
  mount_in "$1" /dev --bind /dev
  mount_in "$1" /dev/pts --bind /dev/pts
}
log=$cache/$suite.log  # what debootstrap and apt said; its tail is shown when they fail
install_packages() { # install_packages ROOT: apt inside the chroot
  cp -L /etc/resolv.conf "$1/etc/resolv.conf" 2>/dev/null || true
  if in_root "$1" apt-get update -q >>"$log" 2>&1 &&
    in_root "$1" apt-get install -y -q --no-install-recommends "${packages[@]}" >>"$log" 2>&1 &&
    in_root "$1" apt-get clean >>"$log" 2>&1; then
    return 0
  fi
  tail -n 20 "$log" >&2
  return 1
}

if [ -f "$root/$stamp" ] && [ "$(cat "$root/$stamp")" = "$want" ]; then
  echo "== trixie: reusing the chroot in $root"
elif [ -f "$root/$stamp" ]; then
  echo "== trixie: updating the chroot in $root (package list or archive changed)"
  mount_system "$root"
  install_packages "$root" || { unmount_all; unavailable "apt-get in the chroot failed (log: $log)"; }
  unmount_all
  echo "$want" >"$root/$stamp"
else
  # Build aside and rename when complete, so an interrupted run never leaves a half chroot.
  new=$root.new
  echo "== trixie: creating a chroot from $url in $root (once per machine; several minutes)"
  rm -rf --one-file-system "$new"
  : >"$log"
  if ! debootstrap --variant=minbase "$suite" "$new" "$url" >>"$log" 2>&1; then
    tail -n 20 "$log" >&2
    rm -rf --one-file-system "$new"
    unavailable "debootstrap $suite from $url failed (log: $log)"
  fi
  mount_system "$new"
  if ! install_packages "$new"; then
    unmount_all
    rm -rf --one-file-system "$new"
    unavailable "apt-get in the new chroot failed (log: $log)"
  fi
  unmount_all
  echo "$want" >"$new/$stamp"
  rm -rf --one-file-system "$root"
  mv "$new" "$root"
fi

in_root "$root" dpkg-query -W -f='== trixie: ${Package} ${Version}\n' \
  libtorch-dev libsimdjson-dev catch2 cmake g++ python3-torch python3-torchvision 2>/dev/null || true
[ "$action" = prepare ] && exit 0

# The source tree, and ../shared beside it where the checkout has one, at fixed places so
# the build folder's absolute paths stay valid from one run to the next.
mount_system "$root"
mount_in "$root" /mnt/optrace/src --bind "$src"
if [ -d "$src/../shared" ]; then
  mount_in "$root" /mnt/optrace/shared --bind "$(cd "$src/../shared" && pwd -P)"
fi
status=0
if [ "$action" = run ]; then
  in_root "$root" bash -c "cd /mnt/optrace/src && $command_line" || status=$?
else
  in_root "$root" OPTRACE_BUILD_DIR="$build" OPTRACE_CMAKE_ARGS="${OPTRACE_CMAKE_ARGS:-}" \
    OPTRACE_TEST_EXCLUDE="${OPTRACE_TEST_EXCLUDE:-}" bash -c 'cd /mnt/optrace/src && bash cmake/dev.sh test' || status=1
fi
unmount_all
exit $status
