#!/usr/bin/env bash
# tests/cli/interrupt.sh OPTRACE LOG WORKDIR: a long replay (LOG on the CPU) stopped by SIGINT,
# then by SIGTERM, once it has started. Each must end with exit status 128 + the signal, the
# report of the inputs that ran printed and written (--json, "complete": false), and one line
# on stderr saying so.
set -u
optrace=$1 log=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

fail() { echo "FAILED: $*"; for f in out.txt err.txt; do echo "--- $f"; cat "$f"; done; exit 1; }

for signal in INT TERM; do
  rm -f r.json out.txt err.txt
  "$optrace" replay "$log" --device cpu --dtype float32 --json r.json >out.txt 2>err.txt &
  pid=$!
  # The CLI says when the replay starts (after libtorch has loaded and the log is read).
  for _ in $(seq 1 1200); do
    grep -q '^optrace: replaying ' err.txt && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q '^optrace: replaying ' err.txt || fail "the replay did not start"
  sleep 2
  kill -s "$signal" "$pid"
  wait "$pid"
  rc=$?
  expected=$([ "$signal" = INT ] && echo 130 || echo 143)
  [ "$rc" -eq "$expected" ] || fail "SIG$signal: exit status $rc, expected $expected"
  grep -q '"complete": false' r.json || fail "SIG$signal: r.json is not marked incomplete"
  grep -Eq '"planned": 56' r.json || fail "SIG$signal: r.json does not say how many inputs were planned"
  grep -Eq 'INCOMPLETE: stopped after [0-9]+ of 56 inputs' out.txt || fail "SIG$signal: no INCOMPLETE summary line"
  grep -Eq "^optrace: stopped by SIG$signal after [0-9]+ of 56 inputs; the report \(written, \"complete\": false\) holds those$" err.txt ||
    fail "SIG$signal: no stderr line saying it stopped"
  echo "SIG$signal: exit $rc; $(grep -Eo 'stopped after [0-9]+ of 56 inputs' out.txt)"
done
