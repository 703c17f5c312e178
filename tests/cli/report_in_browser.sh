#!/usr/bin/env bash
# tests/cli/report_in_browser.sh: `optrace summary --by rank --html` opened in a real browser.
#   report_in_browser.sh OPTRACE OUT.html SHOT.png ADDRESS [--expect REGEX]... [--refuse REGEX]... -- SUMMARY-ARGS...
# Writes OUT.html with `OPTRACE summary --by rank SUMMARY-ARGS --html OUT.html --force`, loads it
# in Debian's headless chromium (chromium-headless-shell, or chromium --headless) at
# file://OUT.html#ADDRESS ("" for none), with the network off, keeps a screenshot in SHOT.png,
# and checks the page as the browser rendered it (its DOM after the script ran, on one line):
# each --expect must match, no --refuse may. Without a chromium: SKIPPED, exit 77.
set -uo pipefail
optrace=$1 out=$2 shot=$3 address=$4
shift 4
expect=() refuse=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --expect) expect+=("$2"); shift 2 ;;
    --refuse) refuse+=("$2"); shift 2 ;;
    *) echo "report_in_browser.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
shift

browser=()
if command -v chromium-headless-shell >/dev/null; then browser=(chromium-headless-shell)
elif command -v chromium >/dev/null; then browser=(chromium --headless)
else
  echo "SKIPPED: no chromium-headless-shell or chromium (Debian: apt-get install chromium-headless-shell)"
  exit 77
fi
# As root (CI) chromium's sandbox cannot start; the page is ours and the network is off.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
browser+=(--no-sandbox --disable-gpu --hide-scrollbars --no-first-run --proxy-server=127.0.0.1:9 --user-data-dir="$profile")

"$optrace" summary --by rank "$@" --html "$out" --force >/dev/null || { echo "optrace summary failed" >&2; exit 1; }
url="file://$(realpath "$out")${address:+#$address}"
dom=$(timeout 60 "${browser[@]}" --dump-dom "$url" 2>/dev/null | tr '\n' ' ')
[ -n "$dom" ] || { echo "$url: the browser rendered nothing" >&2; exit 1; }
timeout 60 "${browser[@]}" --window-size=1280,980 --screenshot="$(realpath -m "$shot")" "$url" >/dev/null 2>&1 ||
  { echo "$url: no screenshot" >&2; exit 1; }
status=0
for re in "${expect[@]}"; do
  grep -Eq -- "$re" <<<"$dom" || { echo "the page lacks: $re" >&2; status=1; }
done
for re in "${refuse[@]}"; do
  if grep -Eq -- "$re" <<<"$dom"; then echo "the page has what it must not: $re" >&2; status=1; fi
done
[ $status = 0 ] || { echo "--- the page as rendered:" >&2; echo "$dom" >&2; }
exit $status
