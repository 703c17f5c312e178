# cmake/clang.sh: sourced by the scripts that build with clang (sanitize.sh, tsan.sh, fuzz.sh).
# optrace_clang prints the clang++ to use: $CXX when set, else clang++-14 or clang++, after
# installing Debian's clang-14 and its sanitizer and libFuzzer runtimes (libclang-rt-14-dev) when
# they are missing (as root, or through sudo), as dev.sh installs what it needs.
optrace_clang() {
  if [ -n "${CXX:-}" ]; then
    echo "$CXX"
    return
  fi
  if ! command -v clang++-14 >/dev/null && ! command -v clang++ >/dev/null ||
     ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    echo "== installing clang-14 and libclang-rt-14-dev" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends clang-14 libclang-rt-14-dev >&2
  fi
  local cxx
  cxx=$(command -v clang++-14 || command -v clang++ || true)
  [ -n "$cxx" ] || { echo "needs clang++ (apt-get install clang-14 libclang-rt-14-dev)" >&2; return 1; }
  echo "$cxx"
}
