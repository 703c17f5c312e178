#!/usr/bin/env bash
# tests/gpu/run.sh: what a machine with an NVIDIA GPU runs. Builds optrace's tests and
# benchmarks against that machine's libtorch (the one PyTorch's wheel ships), runs every
# [cuda] test (materialization, replay, the Profiler's kernels against torch.profiler's, with
# the wheel's own python, on-demand windows with the CUDA activity), the AOTInductor loop with
# torch >= 2.6 (ctest aoti_e2e_*: packages this torch compiles, for the CPU and for CUDA, loaded,
# guarded, verified and served; serve_e2e: a plan's packages served as one set, replaced under
# load), the Profiler's
# save of a large CUDA window beside torch.profiler's, and the materialization and replay
# benchmarks, and leaves the figures in $OPTRACE_GPU_BUILD_DIR/bench_profiler_cuda.txt,
# bench_materialize.txt and bench_replay.txt. The [cuda] Profiler test leaves the trace files that
# tests/data/profiler_cuda/ keeps in $OPTRACE_GPU_BUILD_DIR/tests/ (that folder's README says how).
#
#   bash tests/gpu/run.sh            (from anywhere; build dir: build-gpu, or $OPTRACE_GPU_BUILD_DIR)
#
# Requirements (nothing is downloaded):
# - python3 (or $PYTHON) with a CUDA build of torch; its CMake config is found through
#   torch.utils.cmake_prefix_path;
# - the CUDA toolkit that torch was built against (nvcc): the wheel's TorchConfig.cmake looks
#   for it; /usr/local/cuda is used when present, or set CUDAToolkit_ROOT;
# - cmake >= 3.18, a C++17 compiler, ninja or make;
# - simdjson >= 3.0 and Catch2 (v2 or v3) that CMake can find. When they are missing and the
#   machine has apt-get (as root or through sudo), libsimdjson-dev and catch2 are installed from
#   the distribution's archive; otherwise the script stops and says so. A machine without an
#   archive takes them from a prefix (e.g. Debian's libsimdjson-dev unpacked into one). Extra install prefixes
#   can be given in $OPTRACE_GPU_PREFIX_PATH (';'-separated, CMake style).
# - Note: wheels built with the pre-C++11 ABI (torch._C._GLIBCXX_USE_CXX11_ABI false, torch
#   before 2.7) compile optrace with -D_GLIBCXX_USE_CXX11_ABI=0; a distribution's Catch2 v3 and
#   simdjson libraries are built with the new ABI and may then fail to link. Catch2 v2 is
#   header-only and unaffected.
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=${PYTHON:-python3}
build=${OPTRACE_GPU_BUILD_DIR:-build-gpu}

say() { echo "== $*"; }
die() { echo "tests/gpu/run.sh: $*" >&2; exit 1; }

command -v "$PY" >/dev/null || die "no $PY: a Python with torch is required"
torch_prefix=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)') ||
  die "python cannot import torch"
read -r torch_version torch_cuda cuda_ok cxx11_abi < <("$PY" -c 'import torch
print(torch.__version__, torch.version.cuda, int(torch.cuda.is_available()), int(torch._C._GLIBCXX_USE_CXX11_ABI))')
say "torch $torch_version (CUDA $torch_cuda, cuda available: $cuda_ok, cxx11 abi: $cxx11_abi) at $torch_prefix"
# OPTRACE_GPU_ALLOW_CPU=1 goes on with a CPU-only torch: a check of this script on a machine
# without a GPU (the [cuda] tests then skip, the benchmark prints "no CUDA device").
[ "$torch_cuda" != None ] || [ "${OPTRACE_GPU_ALLOW_CPU:-0}" = 1 ] ||
  die "this torch is a CPU-only build; a CUDA build is needed"
[ "$cuda_ok" = 1 ] || echo "warning: torch sees no CUDA device: the [cuda] tests will skip" >&2

# simdjson and Catch2: present, or installed from the distribution's archive when possible.
have_pkg() {  # have_pkg <CMake package name>
  local dir
  dir=$(mktemp -d)
  printf 'cmake_minimum_required(VERSION 3.18)\nproject(p CXX)\nfind_package(%s REQUIRED)\n' "$1" >"$dir/CMakeLists.txt"
  cmake -S "$dir" -B "$dir/b" -DCMAKE_PREFIX_PATH="${OPTRACE_GPU_PREFIX_PATH:-}" >/dev/null 2>&1
  local rc=$?
  rm -rf "$dir"
  return $rc
}
missing=()
have_pkg simdjson || missing+=(libsimdjson-dev)
have_pkg Catch2 || missing+=(catch2)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if command -v apt-get >/dev/null && { [ -z "$sudo" ] || sudo -n true 2>/dev/null; }; then
    say "installing ${missing[*]} with apt-get"
    $sudo apt-get update -q || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" ||
      die "could not install ${missing[*]}; install simdjson >= 3.0 and Catch2 and rerun (see OPTRACE_GPU_PREFIX_PATH)"
  else
    die "simdjson or Catch2 not found (${missing[*]}) and apt-get is not usable here; install them and rerun (see OPTRACE_GPU_PREFIX_PATH)"
  fi
fi

cuda_args=()
if [ -z "${CUDAToolkit_ROOT:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  cuda_args+=(-DCUDAToolkit_ROOT=/usr/local/cuda -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

say "configuring $build"
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix${OPTRACE_GPU_PREFIX_PATH:+;$OPTRACE_GPU_PREFIX_PATH}" \
  -DOPTRACE_BUILD_EXAMPLES=OFF -DOPTRACE_PYTHON="$(command -v "$PY")" "${cuda_args[@]}"
say "building"
# What runs here only: the test program, the benchmarks (which are not in the default build) and,
# with libtorch >= 2.6, what the AOTInductor loop runs. Keep going past a failed unit: one lease
# shows every error that a new libtorch brings.
targets=(optrace_tests bench_materialize bench_replay bench_profiler)
IFS=. read -r torch_major torch_minor _ <<<"${torch_version%%+*}"
aoti=0
(( torch_major > 2 || (torch_major == 2 && torch_minor >= 6) )) && aoti=1
[ $aoti = 0 ] || targets+=(observe_scripted aoti_serve serve_set optrace_cli optrace_cli_torch)
keep_going=(-k)
[ ${#generator[@]} -eq 0 ] || keep_going=(-k 0)
status=0
cmake --build "$build" --parallel "${OPTRACE_GPU_JOBS:-$(nproc)}" --target "${targets[@]}" -- "${keep_going[@]}" || status=1

say "[cuda] tests"
"$build/tests/optrace_tests" '[cuda]' || status=1

# Each AOTInductor scenario compiles a package (70-110 s apiece on the H200 machine, 2026-11-28):
# CUDA's runs before the benchmarks, the CPU ones last.
if [ $aoti = 1 ]; then
  say "AOTInductor on CUDA: a package compiled for the GPU, loaded, guarded, verified and served"
  (cd "$build" && ctest -R '^aoti_e2e_cuda$' --output-on-failure) || status=1
fi

# OPTRACE_GPU_BENCHMARKS=0 leaves the benchmarks out (a rerun of the tests after a fix).
if [ "${OPTRACE_GPU_BENCHMARKS:-1}" = 1 ]; then
  say "Profiler: a large CUDA window stopped and written, beside torch.profiler"
  "$build/benchmarks/bench_profiler" --cuda | tee "$build/bench_profiler_cuda.txt" || status=1
  "$PY" benchmarks/profiler_torch.py --cuda | tee -a "$build/bench_profiler_cuda.txt" || status=1
  say "materialization benchmark"
  "$build/benchmarks/bench_materialize" | tee "$build/bench_materialize.txt"
  say "replay benchmark"
  "$build/benchmarks/bench_replay" | tee "$build/bench_replay.txt"
fi

# OPTRACE_GPU_AOTI_CPU=0 leaves them out (a lease too short for every package).
if [ $aoti = 1 ] && [ "${OPTRACE_GPU_AOTI_CPU:-1}" = 1 ]; then
  say "AOTInductor on the CPU: this torch's packages (its layout, its compiler), and a plan's set served"
  (cd "$build" && ctest -R '^(aoti_e2e_|serve_e2e$)' -E '^aoti_e2e_cuda$' --output-on-failure) || status=1
fi
exit $status
