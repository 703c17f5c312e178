#!/usr/bin/env bash
# cmake/dev.sh: the README's quick start. `bash cmake/dev.sh demo` builds the demo and the optrace
# command line, and runs the demo (its files go to build/demo/); `bash cmake/dev.sh test` builds the library's tests and examples and
# runs the whole test suite; `bash cmake/dev.sh bench` builds the benchmark programs
# (build/benchmarks/, not run). Each installs the Debian packages it lacks first (as root, or
# through sudo). The test command prints how long the build and the tests took, and ends with
# the tests that skipped and why (only those that cannot run here should: CUDA without a GPU,
# torch 2.6's on an older torch).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  demo|test|bench) ;;
  *) echo "usage: bash cmake/dev.sh demo|test|bench" >&2; exit 2 ;;
esac

packages=(cmake ninja-build g++ libtorch-dev libsimdjson-dev zlib1g-dev catch2)
# The tests that compare with PyTorch run its Python side: python3-torch, and python3-torchvision
# for real architectures (no weights are downloaded). Without them those tests skip.
# libgloo-dev: gloo's headers, which c10d's gloo backend includes (the 2-rank distributed test).
# valgrind: counts the instructions of the CLI's growth test (cli_growth_is_linear).
# chromium-headless-shell: Debian's chromium, headless, which renders summary --by rank's report
# page in its tests (cli_summary_by_rank_html_*).
[ "$mode" = test ] && packages+=(python3-torch python3-torchvision libgloo-dev valgrind chromium-headless-shell)
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
  # The demo, and the command line its files are for.
  cmake --build "$build" --parallel "$jobs" --target demo optrace
  mkdir -p "$build/demo"
  "$build/examples/demo" "$build/demo"
elif [ "$mode" = bench ]; then
  cmake --build "$build" --parallel "$jobs" --target benchmarks
else
  start=$SECONDS
  cmake --build "$build" --parallel "$jobs"
  built=$SECONDS
  status=0
  # A test that hangs fails after OPTRACE_TEST_TIMEOUT seconds (the longest passes in ~140 s on 2
  # cores), named with its output, instead of holding the run until an outer limit kills it.
  # OPTRACE_TEST_EXCLUDE (a ctest -E regex) leaves tests out: CI runs two long ones in one of its
  # Release stages each (.ci/run, docs/ci.md).
  [ -n "${OPTRACE_TEST_EXCLUDE:-}" ] && echo "== dev.sh test: leaving out the tests matching $OPTRACE_TEST_EXCLUDE"
  ctest --test-dir "$build" --output-on-failure --parallel "$jobs" --timeout "${OPTRACE_TEST_TIMEOUT:-900}" \
    ${OPTRACE_TEST_EXCLUDE:+-E "$OPTRACE_TEST_EXCLUDE"} || status=$?
  echo "== dev.sh test: built in $(( built - start )) s, tests ran in $(( SECONDS - built )) s"
  bash cmake/skipped.sh "$build"
  exit $status
fi
