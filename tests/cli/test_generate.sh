#!/usr/bin/env bash
# End-to-end `vela generate` on a fixture model: greedy ids equal transformers' (reference.json),
# --top-logprobs output shape, --batch JSONL in input order, and clear errors on bad input.
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

# Bad input: clear errors, exit code 1, no crash.
for args in "--prompt-ids 1,x" "--prompt-ids 1,999" "--prompt hello" "--prompt-ids 1 --temperature -1"; do
  set +e
  err=$("$VELA" generate --model "$M" $args 2>&1 >/dev/null); rc=$?
  set -e
  [ "$rc" -eq 1 ] || { echo "expected exit 1 for '$args', got $rc: $err"; exit 1; }
  echo "$err" | grep -q "error:" || { echo "no error message for '$args'"; exit 1; }
done
set +e; "$VELA" generate --model /nonexistent --prompt-ids 1 >/dev/null 2>&1; rc=$?; set -e
[ "$rc" -eq 1 ] || { echo "missing model dir: expected exit 1, got $rc"; exit 1; }
echo "bad input: clear errors"
