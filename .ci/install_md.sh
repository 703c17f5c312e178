#!/usr/bin/env bash
# .ci/install_md.sh: docs/install.md's first way ("1. Installed package: find_package") as written,
# on the machine the quick start made, from a folder where the clone is ./optrace: its install
# commands (their own build folder, build-install/, beside the quick start's build/), then a
# project made of its CMake lines, with docs/profiler.md's first example as the program (what a
# newcomer copies), configured and built by its commands, run, and the installed `optrace` tool
# run on the traces it wrote. Installs into /opt/optrace, as the page says: CI's machine only.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd -P)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# block FILE SECTION LANG N: the Nth ```LANG block of FILE's "## SECTION..." section.
block() {
  awk -v section="$2" -v lang="$3" -v want="$4" '
    index($0, "## " section) == 1 { on = 1; next }
    on && /^## / { exit }
    on && !inside && $0 == "```" lang { n++; inside = 1; next }
    on && inside && /^```/ { inside = 0; if (n == want) exit; next }
    on && inside && n == want { print }' "$1"
}
# Shell lines without their comments.
commands() { sed -e 's/[[:space:]]*#.*$//' -e '/^[[:space:]]*$/d'; }

install_commands=$(block "$src/docs/install.md" "1. Installed package" sh 1 | commands)
project_cmake=$(block "$src/docs/install.md" "1. Installed package" cmake 1)
project_commands=$(block "$src/docs/install.md" "1. Installed package" sh 2 | commands)
example=$(block "$src/docs/profiler.md" "Collect traces" cpp 1)
for what in install_commands project_cmake project_commands example; do
  [ -n "${!what}" ] || { echo "install_md: found no $what in docs/" >&2; exit 1; }
done

ln -s "$src" "$work/optrace"
cd "$work"
while IFS= read -r command; do
  echo "== $command"
  bash -c "$command"
done <<<"$install_commands"

mkdir app && cd app
{
  echo "cmake_minimum_required(VERSION 3.18)"
  echo "project(my_app CXX)"
  echo "add_executable(my_app main.cpp)"
  echo "$project_cmake"
} >CMakeLists.txt
{
  grep '^#include' <<<"$example"
  echo "int main() {"
  grep -v '^#include' <<<"$example"
  echo "}"
} >main.cpp
while IFS= read -r command; do
  echo "== $command"
  bash -c "$command"
done <<<"$project_commands"
echo "== ./build/my_app"
./build/my_app >my_app.out
grep -q "Self CPU time total" my_app.out || { echo "install_md: my_app printed no key averages table" >&2; cat my_app.out; exit 1; }
echo "== /opt/optrace/bin/optrace summary traces/kineto/*.pt.trace.json"
/opt/optrace/bin/optrace summary traces/kineto/*.pt.trace.json >summary.out
head -n 5 summary.out
echo "== install_md: docs/install.md's commands and docs/profiler.md's example work as written"
