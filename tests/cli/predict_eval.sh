#!/usr/bin/env bash
# What a new user does with a trained model:
#  * `eval` without -d scores the data the model was trained on (recorded in its metadata): the
#    same report as `eval -d` with that data;
#  * `predict` scores candidates never measured (Ansor lines without "r"): the score depends on the
#    program ("i") only, so each candidate scores as its measured twin does; the cost and error
#    columns stay empty; --rank numbers the candidates within each task, 1 = the highest score;
#  * the training readers still refuse such lines (info counts them as skipped).
# Usage: predict_eval.sh TCLM MODEL_DIR DATA_DIR WORK_DIR  (MODEL_DIR: a model trained on k80=DATA_DIR)
set -euo pipefail
tclm=$1 model=$2/best.tclm data=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

# eval: the model's own data against the same data given with -d.
"$tclm" eval -m "$model" --json "$work/own.json" >"$work/own.txt" 2>"$work/own.err"
grep -q "using the model's training data (k80=$data)" "$work/own.err" || fail "no note on the data: $(cat "$work/own.err")"
"$tclm" eval -m "$model" -d "k80=$data" --json "$work/given.json" >/dev/null 2>&1
cmp -s "$work/own.json" "$work/given.json" || fail "eval without -d differs from eval -d k80=$data"

# predict: 5 programs of each of two tasks, measured and as candidates without "r".
files=("$data"/ansor_avg_pooling_128_168_42_42_3_3_1_SAME.log.gz "$data"/ansor_avg_pooling_128_2016_21_21_1_1_2_VALID.log.gz)
: >"$work/measured.json"
for f in "${files[@]}"; do zcat "$f" | awk '!/^#/ && n < 5 { print; n++ }' >>"$work/measured.json"; done
sed -E 's/, "r": \[\[[^]]*\], [^]]*\]//' "$work/measured.json" >"$work/candidates.json"
grep -q '"r"' "$work/candidates.json" && fail "the candidates still hold \"r\""
"$tclm" predict -m "$model" -i "$work/measured.json" --rank -o "$work/measured.csv" 2>/dev/null
"$tclm" predict -m "$model" -i "$work/candidates.json" --rank -o "$work/candidates.csv" 2>"$work/predict.err"
grep -q "scored 10 records (10 never measured); 0 malformed lines skipped" "$work/predict.err" ||
  fail "unexpected predict log: $(cat "$work/predict.err")"
head -n 1 "$work/candidates.csv" | grep -qx "line,workload_key,score,mean_cost_sec,error_no,rank" || fail "header"
# Columns from the end (the workload key holds commas): rank, error_no, mean_cost_sec, score.
awk -F, 'NR > 1 { print $(NF-3) }' "$work/measured.csv" >"$work/m.scores"
awk -F, 'NR > 1 { print $(NF-3) }' "$work/candidates.csv" >"$work/c.scores"
cmp -s "$work/m.scores" "$work/c.scores" || fail "a candidate scores unlike its measured twin"
awk -F, 'NR > 1 && ($(NF-2) != "" || $(NF-1) != "") { exit 1 }' "$work/candidates.csv" ||
  fail "cost or error columns of an unmeasured candidate are not empty"
awk -F, 'NR > 1 && ($(NF-2) == "" || $(NF-1) != "0") { exit 1 }' "$work/measured.csv" ||
  fail "a measured record lost its cost or error number"
# Ranks: per task (lines 1-5 and 6-10 of the input) a permutation of 1..5, ordered as the scores.
awk -F, 'NR > 1 { t = (NR - 2 < 5) ? 0 : 1; s[t, $NF] = $(NF-3); n[t]++; seen[t, $NF]++ }
         END { for (t = 0; t < 2; t++) { if (n[t] != 5) exit 1
                 for (r = 1; r <= 5; r++) if (seen[t, r] != 1) exit 1
                 for (r = 1; r < 5; r++) if (s[t, r] + 0 < s[t, r + 1] + 0) exit 1 } }' "$work/candidates.csv" ||
  fail "ranks are not 1..5 per task in the order of the scores: $(cat "$work/candidates.csv")"
"$tclm" predict -m "$model" -i "$work/candidates.json" --rank --format json -o "$work/candidates.out" 2>/dev/null
grep -q '"mean_cost_sec": null' "$work/candidates.out" || fail "JSON: no null cost"
grep -q '"rank": 1' "$work/candidates.out" || fail "JSON: no rank"

# The training readers keep requiring a measurement.
"$tclm" info -d "k80=$work/candidates.json" >"$work/info.txt" 2>&1 || true
grep -q "10 skipped lines" "$work/info.txt" || fail "info accepted unmeasured lines: $(cat "$work/info.txt")"
grep -q 'missing field "r"' "$work/info.txt" || fail "info does not say why: $(cat "$work/info.txt")"
echo "predict/eval: OK"
