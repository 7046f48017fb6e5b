#!/usr/bin/env bash
# End-to-end `vela generate` on a fixture model: greedy ids equal transformers' (reference.json),
# --top-logprobs output shape, --batch JSONL in input order, clear errors on bad input, and
# constrained decoding (--json-schema / --regex / --choice).
# usage: test_generate.sh path/to/vela   (run from tests/)
set -euo pipefail
VELA="$1"
M=fixtures/models/qwen3_qknorm
PROMPT=$(python3 -c "import json; print(','.join(map(str, json.load(open('$M/reference.json'))['prompt_ids'])))")
EXPECT=$(python3 -c "import json; print(json.load(open('$M/reference.json'))['greedy_ids'])")

out=$("$VELA" generate --model "$M" --prompt-ids "$PROMPT" --max-tokens 8 --ignore-eos --json --top-logprobs 3)
python3 - "$out" "$EXPECT" <<'PY'
import json, sys
got = json.loads(sys.argv[1]); want = json.loads(sys.argv[2])
assert got["tokens"] == want, (got["tokens"], want)
assert len(got["top_logprobs"]) == 8 and all(len(s) == 3 for s in got["top_logprobs"])
assert all(s[0]["id"] == t for s, t in zip(got["top_logprobs"], got["tokens"]))
print("generate: greedy ids match transformers")
PY

batch=$(mktemp)
trap 'rm -f "$batch"' EXIT
printf '%s\n' "{\"prompt_ids\": [$PROMPT], \"max_tokens\": 8, \"temperature\": 0, \"ignore_eos\": true}" \
  '{"prompt_ids": [5, 6, 7], "max_tokens": 4, "temperature": 0.8, "seed": 3, "n": 2, "ignore_eos": true, "logprobs": true}' > "$batch"
out=$("$VELA" generate --model "$M" --batch "$batch")
python3 - "$out" "$EXPECT" <<'PY'
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines()]
want = json.loads(sys.argv[2])
assert len(lines) == 2
assert lines[0]["tokens"] == want and lines[0]["finish_reason"] == "length"
assert len(lines[1]["choices"]) == 2 and len(lines[1]["logprobs"]) == 4
print("generate --batch: results in input order")
PY

# --dtype auto (the default) computes an f32 checkpoint in f32 on the CPU: the same tokens as
# --dtype f32 (a bf16 checkpoint's rule is checked by test_demo_model.sh).
for dt in auto f32; do
  got=$("$VELA" generate --model "$M" --prompt-ids "$PROMPT" --max-tokens 8 --ignore-eos --json --dtype $dt)
  python3 -c "import json,sys; assert json.loads(sys.argv[1])['tokens'] == json.loads(sys.argv[2]), sys.argv[1]" "$got" "$EXPECT"
done
echo "generate --dtype auto: an f32 checkpoint in f32 on the CPU"

# Bad input: clear errors, exit code 1, no crash.
for args in "--prompt-ids 1,x" "--prompt-ids 1,999" "--prompt hello" "--prompt-ids 1 --temperature -1" \
            "--prompt-ids 1 --dtype f8"; do
  set +e
  err=$("$VELA" generate --model "$M" $args 2>&1 >/dev/null); rc=$?
  set -e
  [ "$rc" -eq 1 ] || { echo "expected exit 1 for '$args', got $rc: $err"; exit 1; }
  echo "$err" | grep -q "error:" || { echo "no error message for '$args'"; exit 1; }
done
set +e; "$VELA" generate --model /nonexistent --prompt-ids 1 >/dev/null 2>&1; rc=$?; set -e
[ "$rc" -eq 1 ] || { echo "missing model dir: expected exit 1, got $rc"; exit 1; }
echo "bad input: clear errors"

# Constrained decoding (--json-schema / --regex / --choice): the fixture model copied next to a
# 128-token tokenizer (ids 0-2 special, then printable ASCII, newline and digit pairs), sampled
# at temperature 1; every output must match, and a bad schema is an error naming the keyword.
cdir=$(mktemp -d)
trap 'rm -f "$batch"; rm -rf "$cdir"' EXIT
cp "$M"/config.json "$M"/model.safetensors "$cdir"/
python3 - "$cdir" <<'PY'
import json, sys
toks = ["<unk>", "<s>", "</s>"] + [chr(c) for c in range(32, 127)] + ["\n"]
toks += ["%02d" % i for i in range(128 - len(toks))]
vocab = {t: i for i, t in enumerate(toks)}
added = [{"id": i, "content": toks[i], "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True} for i in range(3)]
tj = {"version": "1.0", "added_tokens": added, "normalizer": None, "pre_tokenizer": None,
      "post_processor": None, "decoder": {"type": "Fuse"},
      "model": {"type": "BPE", "vocab": vocab, "merges": []}}
json.dump(tj, open(sys.argv[1] + "/tokenizer.json", "w"))
json.dump({"type": "object", "properties": {"ok": {"type": "boolean"},
           "n": {"type": "integer", "minimum": 1, "maximum": 99}},
           "required": ["ok", "n"], "additionalProperties": False},
          open(sys.argv[1] + "/schema.json", "w"))
json.dump({"type": "object", "properties": {"a": {"not": {}}}}, open(sys.argv[1] + "/bad.json", "w"))
PY
for seed in 1 2 3; do
  out=$("$VELA" generate --model "$cdir" --prompt-ids 5,6,7 --max-tokens 55 --temperature 1 \
    --seed "$seed" --json-schema "$cdir/schema.json" --json)
  python3 - "$out" <<'PY'
import json, sys
v = json.loads(json.loads(sys.argv[1])["text"])
assert set(v) == {"ok", "n"} and isinstance(v["ok"], bool) and 1 <= v["n"] <= 99, v
PY
  out=$("$VELA" generate --model "$cdir" --prompt-ids 5,6,7 --max-tokens 20 --temperature 1 \
    --seed "$seed" --regex '[0-9]{3}-[a-f]{2}')
  echo "$out" | grep -Eqx '[0-9]{3}-[a-f]{2}' || { echo "regex output '$out'"; exit 1; }
  out=$("$VELA" generate --model "$cdir" --prompt-ids 5,6,7 --max-tokens 20 --temperature 1 \
    --seed "$seed" --choice yes,no)
  [ "$out" = yes ] || [ "$out" = no ] || { echo "choice output '$out'"; exit 1; }
done
set +e; err=$("$VELA" generate --model "$cdir" --prompt-ids 1 --json-schema "$cdir/bad.json" 2>&1); set -e
echo "$err" | grep -q "unsupported keyword 'not'" || { echo "bad schema: '$err'"; exit 1; }
echo "generate: constrained outputs match"
