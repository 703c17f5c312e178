#!/usr/bin/env bash
# tests/cli/front_end.sh OPTRACE OPTRACE_TORCH DATA WORKDIR: the front end (`optrace`, built
# without libtorch) answers as the whole tool (`optrace-torch`) does, and hands it what it cannot do.
#  - it does not load libtorch (ldd);
#  - summary (text and --json, with --strides too; --by time too), merge and convert to hf: the
#    same stdout, stderr, exit status and written bytes as optrace-torch, on every format (Kineto
#    .gz, logs, hf) and on bad input;
#  - Kineto outputs: written by the front end, the same bytes;
#  - observation files (every file of DATA/observations, text and --json): the same answers,
#    and the front end shows them without optrace-torch beside it;
#  - text outputs (PyTorch's logger's rules, by the captured schema facts): the same bytes and
#    report, from every format;
#  - replay: run by optrace-torch (same results).
set -u
front=$1 full=$2 data=$3 work=$4
rm -rf "$work" && mkdir -p "$work/front" "$work/full" || exit 1
fail() { echo "FAILED: $*"; exit 1; }

if ldd "$front" | grep -q "libtorch"; then ldd "$front"; fail "$front links libtorch"; fi

inputs=("$data/kineto/mtia_inference.pt.trace.json.gz" "$data/kineto/rocm_minitoy_train.pt.trace.json.gz"
        "$data/kineto/small_base.pt.trace.json.gz" "$data/oplogs/resnet18_training.txt"
        "$data/peer/mlp.hf_op_trace.json" "$data/execution_trace/train_step.et.json.gz")
# Runs "$@" with both programs (OUT in the arguments: each its own folder); compares everything.
same() {
  local name=$1; shift
  local a=() b=()
  for x in "$@"; do a+=("${x//OUT/$work/front}"); b+=("${x//OUT/$work/full}"); done
  "$front" "${a[@]}" >"$work/front/$name.out" 2>"$work/front/$name.err"; local ra=$?
  "$full" "${b[@]}" >"$work/full/$name.out" 2>"$work/full/$name.err"; local rb=$?
  [ "$ra" = "$rb" ] || fail "$name: exit $ra (front end) vs $rb (optrace-torch)"
  for f in out err; do
    # (replay's wall time aside)
    sed "s|$work/front|OUT|g; s|, [0-9.]* s)|, T s)|" "$work/front/$name.$f" >"$work/front/$name.$f.n"
    sed "s|$work/full|OUT|g; s|, [0-9.]* s)|, T s)|" "$work/full/$name.$f" >"$work/full/$name.$f.n"
    cmp -s "$work/front/$name.$f.n" "$work/full/$name.$f.n" ||
      { diff "$work/front/$name.$f.n" "$work/full/$name.$f.n" | head -10; fail "$name: std$f differs"; }
  done
}
for k in "${!inputs[@]}"; do
  same "summary$k" summary "${inputs[$k]}"
  same "summary_json$k" summary "${inputs[$k]}" --json --strides
  same "by_time$k" summary --by time "${inputs[$k]}"
  same "by_time_json$k" summary --by time "${inputs[$k]}" --json --group-by-shape --top 5
  same "convert$k" convert "${inputs[$k]}" -o "OUT/c$k.json"
  cmp -s "$work/front/c$k.json" "$work/full/c$k.json" || fail "convert ${inputs[$k]}: the written traces differ"
done
same merge merge "${inputs[@]}" -o OUT/merged.json
cmp -s "$work/front/merged.json" "$work/full/merged.json" || fail "merge: the written traces differ"
same many summary "${inputs[@]}" --top 3
# Bad input and bad usage: the same message and status.
printf '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": "x", "dur": 1}]}' >"$work/bad.json"
same bad summary "$work/bad.json"
same missing summary "$work/no-such-file.json"
same usage summary --nope
same convert_exists convert "${inputs[4]}" -o "OUT/c0.json"
# Kineto outputs (.gz too), from every format.
for k in "${!inputs[@]}"; do
  same "to_kineto$k" convert "${inputs[$k]}" -o "OUT/k$k.pt.trace.json.gz"
  cmp -s <(gzip -dc "$work/front/k$k.pt.trace.json.gz") <(gzip -dc "$work/full/k$k.pt.trace.json.gz") ||
    fail "convert ${inputs[$k]} to Kineto: the written traces differ"
done
# Observation files, shown by the front end itself (also without optrace-torch, below).
observations=("$data"/observations/*.json)
for k in "${!observations[@]}"; do
  same "observations$k" summary "${observations[$k]}"
  same "observations_json$k" summary "${observations[$k]}" --json --top 1
done
same observations_many summary "${observations[@]}" "${inputs[4]}" --top 2
same merge_kineto merge "${inputs[@]}" -o OUT/merged.pt.trace.json
cmp -s "$work/front/merged.pt.trace.json" "$work/full/merged.pt.trace.json" || fail "merge to Kineto: the written traces differ"
# What needs libtorch is handed over: the same results as optrace-torch's own.
same replay replay "${inputs[4]}" --device meta --no-progress
# Text outputs (logs), from every format, with and without non-compute ops.
for k in "${!inputs[@]}"; do
  same "to_text$k" convert "${inputs[$k]}" -o "OUT/t$k.txt"
  cmp -s "$work/front/t$k.txt" "$work/full/t$k.txt" || fail "convert ${inputs[$k]} to text: the written logs differ"
done
same to_text_all merge "${inputs[@]}" -o OUT/all.txt.gz --keep-non-compute
cmp -s <(gzip -dc "$work/front/all.txt.gz") <(gzip -dc "$work/full/all.txt.gz") || fail "merge to text: the written logs differ"
# Without optrace-torch beside it, what needs libtorch fails clearly (exit 2, one line naming it).
mkdir -p "$work/alone" && cp "$front" "$work/alone/optrace"
"$work/alone/optrace" replay "${inputs[4]}" >"$work/alone.out" 2>"$work/alone.err"; rc=$?
[ "$rc" = 2 ] || fail "replay without optrace-torch: exit $rc"
grep -q "^optrace: IoError: this command needs libtorch, and $work/alone/optrace-torch (the tool built with it) cannot be run: No such file or directory$" "$work/alone.err" ||
  { cat "$work/alone.err"; fail "replay without optrace-torch: unexpected message"; }
"$work/alone/optrace" summary "${inputs[0]}" >/dev/null || fail "summary without optrace-torch"
"$work/alone/optrace" convert "${inputs[0]}" -o "$work/alone.txt" >/dev/null 2>&1 || fail "convert to text without optrace-torch"
cmp -s "$work/alone.txt" "$work/full/t0.txt" || fail "convert to text without optrace-torch: another log"
"$work/alone/optrace" summary "${observations[@]}" >"$work/alone.obs" || fail "observation files without optrace-torch"
"$full" summary "${observations[@]}" >"$work/full.obs"
cmp -s "$work/alone.obs" "$work/full.obs" || fail "observation files without optrace-torch: other answers"
echo "front end and optrace-torch agree"
