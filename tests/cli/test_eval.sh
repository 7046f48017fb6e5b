#!/usr/bin/env bash
# End-to-end `vela eval ppl|choice|generate` on a fixture model with the byte-level test tokenizer
# (tests/fixtures/eval): ppl equals the transformers golden, the table and --output JSON of each
# subcommand, reproducibility, and clear errors (exit 1, file:line and field on stderr) for
# malformed files.
# usage: test_eval.sh path/to/vela   (run from tests/)
set -euo pipefail
VELA="$1"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
M="$T/model"
mkdir -p "$M"
cp fixtures/models/llama_gqa/config.json fixtures/models/llama_gqa/model.safetensors "$M/"
cp fixtures/eval/tokenizer.json "$M/"

# ppl: the golden's first setting (max_length 64, stride 32) over the committed documents.
"$VELA" eval ppl --model "$M" --data fixtures/eval/ppl_docs.jsonl --max-length 64 --stride 32 \
  --output "$T/ppl.json" --no-progress > "$T/ppl.txt"
grep -q "perplexity" "$T/ppl.txt" || { echo "ppl: no table"; cat "$T/ppl.txt"; exit 1; }
python3 - "$T/ppl.json" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))
gold = json.load(open("fixtures/eval/ppl_golden.json"))["models"]["llama_gqa"][0]
assert gold["max_length"] == 64 and gold["stride"] == 32
rel = abs(got["metrics"]["perplexity"] - gold["perplexity"]) / gold["perplexity"]
assert rel < 1e-5, (got["metrics"], gold["perplexity"])
assert got["counts"]["n_scored"] == gold["n_scored"] and got["counts"]["n_bytes"] == gold["n_bytes"]
print(f"eval ppl: perplexity {got['metrics']['perplexity']:.4f} matches transformers (rel {rel:.1e})")
PY

# choice: the three layouts in one file each.
printf '%s\n' '{"question": "2+2=?", "subject": "math", "choices": ["3", "4", "5", "6"], "answer": 1}' \
  '{"question": "Red+blue?", "choices": ["pink", "purple", "gold", "teal"], "answer": "B"}' > "$T/mmlu.jsonl"
printf '%s\n' '{"question": "Sky color?", "choices": {"text": ["blue", "green"], "label": ["A", "B"]}, "answerKey": "A"}' > "$T/arc.jsonl"
printf '%s\n' '{"activity_label": "Cooking", "ctx_a": "A man cuts bread.", "ctx_b": "he", "endings": ["eats it.", "sings."], "label": "0"}' > "$T/hs.jsonl"
for f in mmlu arc hs; do
  "$VELA" eval choice --model "$M" --data "$T/$f.jsonl" --output "$T/c_$f.json" --no-progress > "$T/c_$f.txt"
  grep -q "acc_norm" "$T/c_$f.txt" || { echo "choice $f: no table"; exit 1; }
done
"$VELA" eval choice --model "$M" --data "$T/mmlu.jsonl" --fewshot-file "$T/mmlu.jsonl" --num-fewshot 1 \
  --seed 3 --output "$T/c_fs1.json" --no-progress > /dev/null
"$VELA" eval choice --model "$M" --data "$T/mmlu.jsonl" --fewshot-file "$T/mmlu.jsonl" --num-fewshot 1 \
  --seed 3 --output "$T/c_fs2.json" --no-progress > /dev/null
python3 - "$T" <<'PY'
import json, sys
t = sys.argv[1]
for f, n in (("mmlu", 2), ("arc", 1), ("hs", 1)):
    r = json.load(open(f"{t}/c_{f}.json"))
    assert r["task"] == "choice" and r["counts"]["n_documents"] == n, r
    acc = sum(s["pred"] == s["gold"] for s in r["samples"]) / n
    assert abs(r["metrics"]["acc"] - acc) < 1e-12
a, b = json.load(open(f"{t}/c_fs1.json")), json.load(open(f"{t}/c_fs2.json"))
assert a["samples"] == b["samples"], "few-shot run is not reproducible"
print("eval choice: MMLU / ARC / HellaSwag layouts, reproducible few-shot")
PY

# generate: GSM8K layout, greedy, scored by the '#### N' answer; --limit.
printf '%s\n' '{"question": "What is 2+2?", "answer": "2+2=4\n#### 4"}' \
  '{"question": "What is 3+3?", "answer": "#### 6"}' '{"question": "unused", "answer": "#### 1"}' > "$T/gsm.jsonl"
"$VELA" eval generate --model "$M" --data "$T/gsm.jsonl" --limit 2 --max-tokens 8 --output "$T/g.json" \
  --no-progress > "$T/g.txt"
"$VELA" eval generate --model "$M" --data "$T/gsm.jsonl" --limit 2 --max-tokens 8 --scorer rouge_l \
  --stop '["\n"]' --no-progress > "$T/g_rouge.txt"
grep -q "rouge_l" "$T/g_rouge.txt" || { echo "generate: no rouge_l row"; exit 1; }
python3 - "$T/g.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["config"]["scorer"] == "gsm8k" and r["counts"]["n_documents"] == 2
assert all(s["references"] for s in r["samples"])
print("eval generate: gsm8k scorer, --limit, --output")
PY

# Malformed input: exit 1, an error naming the file, record and field; never a crash.
expect_error() {  # expect_error "grep pattern" vela-args...
  local want="$1"; shift
  set +e
  err=$("$VELA" eval "$@" --no-progress 2>&1 >/dev/null); rc=$?
  set -e
  [ "$rc" -eq 1 ] || { echo "expected exit 1 for '$*', got $rc: $err"; exit 1; }
  echo "$err" | grep -qF -- "$want" || { echo "error for '$*' does not say '$want': $err"; exit 1; }
}
printf '%s\n' '{"question": "q", "choices": ["a", "b", "c", "d"], "answer": 1}' \
  '{"question": "q", "choices": ["a", "b", "c", "d"], "answer": 7}' > "$T/bad_idx.jsonl"
printf '%s\n' '{"question": "q", "choices": ["a", "b", "c", "d"], "answer": "Z"}' > "$T/bad_letter.jsonl"
printf '%s\n' '{"question": "q", "answer": 1}' > "$T/bad_missing.jsonl"
printf '%s\n' '{"question": "q", "choices": ["a", "b"], "answer": 1}' '{"question": ' > "$T/bad_json.jsonl"
: > "$T/empty.jsonl"
expect_error "bad_idx.jsonl:2: field 'answer': answer index 7 is out of range for 4 choices" \
  choice --model "$M" --data "$T/bad_idx.jsonl"
expect_error "bad_letter.jsonl:1: field 'answer': answer letter 'Z'" choice --model "$M" --data "$T/bad_letter.jsonl"
expect_error "bad_missing.jsonl:1: not a known multiple-choice layout" choice --model "$M" --data "$T/bad_missing.jsonl"
expect_error "bad_missing.jsonl:1: field 'choices': missing" choice --format mmlu --model "$M" --data "$T/bad_missing.jsonl"
expect_error "bad_json.jsonl:2: invalid JSON" choice --model "$M" --data "$T/bad_json.jsonl"
expect_error "empty.jsonl: no records" choice --model "$M" --data "$T/empty.jsonl"
expect_error "empty.jsonl: no records" generate --model "$M" --data "$T/empty.jsonl"
expect_error "empty.jsonl: the file is empty" ppl --format text --model "$M" --data "$T/empty.jsonl"
expect_error "bad_missing.jsonl:1: field 'text': missing" ppl --model "$M" --data "$T/bad_missing.jsonl"
printf '%s\n' '{"question": "q"}' > "$T/noref.jsonl"
expect_error "noref.jsonl:1: no reference field" generate --model "$M" --data "$T/noref.jsonl"
expect_error "does not exist" ppl --model "$M" --data "$T/nope.jsonl"
expect_error "unknown eval task 'bleu'" bleu --model "$M" --data "$T/gsm.jsonl"
expect_error "--stride 100 must not exceed --max-length 10" ppl --model "$M" --data fixtures/eval/ppl_docs.jsonl --max-length 10 --stride 100
expect_error "unknown" choice --model "$M" --data "$T/mmlu.jsonl" --frobnicate 1
"$VELA" eval --help | grep -q "vela eval ppl|choice|generate" || { echo "no --help"; exit 1; }
echo "eval: malformed files give clear errors"
