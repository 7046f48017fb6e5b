#!/usr/bin/env bash
# End-to-end `vela preprocess`: a config file plus flag overrides, two JSONL inputs with bad
# records (counted, not fatal), the index and shards on disk, the JSON summary, and clear errors
# (exit 1, "error:") for a bad config key, a bad flag value, a missing input and no usable records.
# Skips (exit 77, ctest's SKIP_RETURN_CODE) when the Qwen3 tokenizer has not been fetched; fails
# instead with VELA_REQUIRE_ASSETS=1 (scripts/test.sh).
# usage: test_preprocess.sh path/to/vela   (run from tests/)
set -euo pipefail
VELA="$1"
TOK="${VELA_ASSETS:-$(cd .. && pwd)/.cache/assets}/tokenizers/qwen3"
if [ ! -f "$TOK/tokenizer.json" ]; then
  if [ -n "${VELA_REQUIRE_ASSETS:-}" ] && [ "${VELA_REQUIRE_ASSETS}" != 0 ]; then
    echo "FAIL: no Qwen3 tokenizer at $TOK (VELA_REQUIRE_ASSETS is set; run scripts/fetch_assets.sh)"
    exit 1
  fi
  echo "SKIP: no Qwen3 tokenizer at $TOK (run scripts/fetch_assets.sh)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

printf '%s\n' '{"title": "Genesis 1", "text": "In the beginning God created the heaven and the earth."}' \
  '{"title": "Genesis 2", "text": "Thus the heavens and the earth were finished."}' \
  '{"title": 3, "text": "wrong type"}' 'not json' > "$dir/a.jsonl"
printf '%s\n' '{"title": "John 1", "text": "In the beginning was the Word."}' > "$dir/b.jsonl"
cat > "$dir/prep.json" <<JSON
{"tokenizer": "$TOK", "format": "text",
 "sections": [{"field": "title", "train": false, "suffix": "\n"}, {"field": "text"}],
 "eos_token": "<|endoftext|>", "seq_len": 2048, "packing": true}
JSON

out=$("$VELA" preprocess --config "$dir/prep.json" "$dir/a.jsonl" "$dir/b.jsonl" -o "$dir/out" \
        --seq-len 32 --packing false --quiet --json)
python3 - "$out" "$dir/out" <<'PY'
import json, os, sys
s = json.loads(sys.argv[1]); out = sys.argv[2]
assert s["n_records"] == 5 and s["n_ok"] == 3 and s["n_bad"] == 2, s
assert s["bad"] == {"invalid_json": 1, "wrong_type": 1}, s["bad"]
assert s["n_sequences"] == 3, s  # --packing false overrides the file
ix = json.load(open(os.path.join(out, "index.json")))
assert ix["config"]["seq_len"] == 32 and ix["config"]["packing"] is False, ix["config"]
assert ix["n_sequences"] == 3 and ix["n_docs"] == 3
for sh in ix["shards"]:
    assert os.path.getsize(os.path.join(out, sh["file"])) == sh["bytes"]
print("preprocess: config + overrides, bad records counted, index and shards written")
PY

# Human summary (progress bar on stderr).
"$VELA" preprocess --config "$dir/prep.json" "$dir/a.jsonl" -o "$dir/out2" 2>"$dir/err" | grep -q "records: 2 kept, 2 bad"
grep -q "preprocess" "$dir/err"
echo "preprocess: summary and progress"

expect_error() {
  set +e
  err=$("$VELA" preprocess "$@" 2>&1 >/dev/null); rc=$?
  set -e
  [ "$rc" -eq 1 ] || { echo "expected exit 1 for '$*', got $rc: $err"; exit 1; }
  echo "$err" | grep -q "error:" || { echo "no error message for '$*': $err"; exit 1; }
}
echo '{"tokenizer": "x", "seqlen": 3}' > "$dir/bad.json"
expect_error --config "$dir/bad.json" "$dir/a.jsonl" -o "$dir/o3"
msg=$("$VELA" preprocess --config "$dir/bad.json" "$dir/a.jsonl" -o "$dir/o3" 2>&1 || true)
echo "$msg" | grep -q "unknown key 'seqlen'" || { echo "unhelpful message: $msg"; exit 1; }
expect_error --config "$dir/prep.json" "$dir/a.jsonl" -o "$dir/o3" --packing maybe
expect_error --config "$dir/prep.json" "$dir/missing.jsonl" -o "$dir/o3"
expect_error --config "$dir/prep.json" "$dir/a.jsonl"
expect_error --config "$dir/prep.json" "$dir/a.jsonl" -o "$dir/o3" --bogus 1
echo 'junk' > "$dir/junk.jsonl"
expect_error --config "$dir/prep.json" "$dir/junk.jsonl" -o "$dir/o3"
[ ! -e "$dir/o3/index.json" ]
echo "preprocess: bad input gives clear errors"
