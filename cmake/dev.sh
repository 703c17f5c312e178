#!/usr/bin/env bash
# cmake/dev.sh: the README's quick start. `bash cmake/dev.sh demo` builds and runs the demo (its
# files go to build/demo/); `bash cmake/dev.sh test` builds the library's tests and examples and
# runs the whole test suite; `bash cmake/dev.sh bench` builds the benchmark programs
# (build/benchmarks/, not run). Each installs the Debian packages it lacks first (as root, or
# through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  demo|test|bench) ;;
  *) echo "usage: bash cmake/dev.sh demo|test|bench" >&2; exit 2 ;;
esac

packages=(cmake ninja-build g++ libtorch-dev libsimdjson-dev zlib1g-dev catch2)
# python3-torch lets the interoperability tests run Python's side; they skip without it.
[ "$mode" = test ] && packages+=(python3-torch)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build=${OPTRACE_BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${OPTRACE_CMAKE_ARGS:-}
if [ "$mode" = demo ]; then
  cmake --build "$build" --parallel "$jobs" --target demo
  mkdir -p "$build/demo"
  "$build/examples/demo" "$build/demo"
elif [ "$mode" = bench ]; then
  cmake --build "$build" --parallel "$jobs" --target benchmarks
else
  cmake --build "$build" --parallel "$jobs"
  ctest --test-dir "$build" --output-on-failure --parallel "$jobs"
fi
