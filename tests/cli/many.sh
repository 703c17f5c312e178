#!/usr/bin/env bash
# tests/cli/many.sh OPTRACE DATA WORKDIR: many files in one run give what one-at-a-time runs give.
# Inputs: an hf trace, an operator-inputs log, gzip-compressed Kineto traces (a mix of formats).
#  - summary A B C... prints each file's summary, in the order given, as separate runs do;
#  - merge with --jobs 3 writes the same file as --jobs 1, and as merging one file after another;
#  - convert A B C... -o DIR writes, for each input, the file a single convert writes.
set -u
optrace=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
inputs=("$data/peer/mlp.hf_op_trace.json" "$data/oplogs/tts_angular_training.txt"
        "$data/kineto/rocm_minitoy_train.pt.trace.json.gz" "$data/kineto/small_base.pt.trace.json.gz"
        "$data/oplogs/BertForMaskedLM_training.txt")
fail() { echo "FAILED: $*"; exit 1; }

# summary: the same text as one run per file, separated by a blank line.
"$optrace" summary "${inputs[@]}" --jobs 3 >"$work/many.txt" || fail "summary of many exited $?"
: >"$work/single.txt"
for k in "${!inputs[@]}"; do
  [ "$k" -gt 0 ] && echo >>"$work/single.txt"
  "$optrace" summary "${inputs[$k]}" >>"$work/single.txt" || fail "summary ${inputs[$k]}"
done
cmp -s "$work/many.txt" "$work/single.txt" || { diff "$work/many.txt" "$work/single.txt" | head -20; fail "summary of many differs from single runs"; }

# merge: the same trace whatever the number of jobs, and as a chain of two-file merges.
"$optrace" merge "${inputs[@]}" -o "$work/merged1.json" --jobs 1 >/dev/null || fail "merge --jobs 1"
"$optrace" merge "${inputs[@]}" -o "$work/merged3.json" --jobs 3 >/dev/null || fail "merge --jobs 3"
cmp -s "$work/merged1.json" "$work/merged3.json" || fail "merge --jobs 3 differs from --jobs 1"
"$optrace" convert "${inputs[0]}" -o "$work/chain0.json" --quiet || fail "convert for the chain"
for k in 1 2 3 4; do
  "$optrace" merge "$work/chain$((k - 1)).json" "${inputs[$k]}" -o "$work/chain$k.json" >/dev/null || fail "chain merge $k"
done
cmp -s "$work/merged1.json" "$work/chain4.json" || fail "merge of many differs from merging one file after another"

# convert many into a directory: each output as a single convert writes it.
"$optrace" convert "${inputs[@]}" -o "$work/out" --jobs 2 --quiet || fail "convert of many exited $?"
for input in "${inputs[@]}"; do
  name=$(basename "$input")
  name=${name%.gz}; name=${name%.pt.trace.json}; name=${name%.hf_op_trace.json}; name=${name%.json}; name=${name%.txt}
  "$optrace" convert "$input" -o "$work/single.hf_op_trace.json" --quiet --force || fail "convert $input"
  cmp -s "$work/out/$name.hf_op_trace.json" "$work/single.hf_op_trace.json" || fail "convert of many: $name differs"
done
# A second run refuses to replace them, naming the first one, and leaves them as they are.
"$optrace" convert "${inputs[@]}" -o "$work/out" --quiet 2>"$work/err.txt" && fail "convert into a full directory succeeded"
grep -q "^optrace: $work/out/mlp.hf_op_trace.json: IoError: exists; pass --force to replace it$" "$work/err.txt" ||
  fail "unexpected error: $(cat "$work/err.txt")"
echo "many files: summary, merge (--jobs 1 and 3, and chained) and convert agree with one-at-a-time runs"
