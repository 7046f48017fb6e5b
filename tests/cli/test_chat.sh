#!/usr/bin/env bash
# End-to-end `vela chat`: a fixture model with a 128-token character tokenizer and a small chat
# template; the streamed replies must equal `vela generate` on the rendered prompt, /reset must
# drop the history, /quit must leave cleanly, and a model without a template is a clear error.
# usage: test_chat.sh path/to/vela   (run from tests/)
set -euo pipefail
VELA="$1"
M=$(mktemp -d)
trap 'rm -rf "$M"' EXIT
cp fixtures/models/qwen3_qknorm/config.json fixtures/models/qwen3_qknorm/model.safetensors "$M"/
python3 - "$M" <<'PY'
import json, sys
d = sys.argv[1]
vocab = {}
for i in range(128):
    vocab[chr(32 + i) if i < 95 else chr(ord('A') + (i - 95) % 26) + str(i)] = i
json.dump({"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
           "post_processor": None, "decoder": {"type": "Fuse"},
           "model": {"type": "BPE", "vocab": vocab, "merges": []}}, open(f"{d}/tokenizer.json", "w"))
tpl = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
       "{% if add_generation_prompt %}<assistant>{% endif %}")
json.dump({"chat_template": tpl}, open(f"{d}/tokenizer_config.json", "w"))
PY

# Greedy chat: turn 1 "hello", /reset, turn 2 "world".
out=$(printf 'hello\n/reset\nworld\n/quit\n' | "$VELA" chat --model "$M" --temperature 0 --max-tokens 6 2>/dev/null)
[ "$(printf '%s\n' "$out" | wc -l)" -eq 2 ] || { echo "expected two replies, got: $out"; exit 1; }
r1=$(printf '%s\n' "$out" | sed -n 1p)
r2=$(printf '%s\n' "$out" | sed -n 2p)
g1=$("$VELA" generate --model "$M" --prompt '<user>hello<assistant>' --max-tokens 6 --temperature 0)
g2=$("$VELA" generate --model "$M" --prompt '<user>world<assistant>' --max-tokens 6 --temperature 0)
[ "$r1" == "$g1" ] || { echo "turn 1: chat '$r1' != generate '$g1'"; exit 1; }
[ "$r2" == "$g2" ] || { echo "turn 2 after /reset: chat '$r2' != generate '$g2'"; exit 1; }
echo "chat: replies equal generate on the rendered prompt; /reset drops history"

# Without /reset the second turn sees the first exchange in its prompt.
out=$(printf 'hello\nworld\n' | "$VELA" chat --model "$M" --temperature 0 --max-tokens 6 2>/dev/null)
r2=$(printf '%s\n' "$out" | sed -n 2p)
g2=$("$VELA" generate --model "$M" --prompt "<user>hello<assistant>${r1}<user>world<assistant>" --max-tokens 6 --temperature 0)
[ "$r2" == "$g2" ] || { echo "turn 2 with history: chat '$r2' != generate '$g2'"; exit 1; }
echo "chat: history carried into the next turn; EOF ends the session"

rm "$M/tokenizer_config.json"
set +e; err=$(echo hi | "$VELA" chat --model "$M" 2>&1 >/dev/null); rc=$?; set -e
[ "$rc" -eq 1 ] && echo "$err" | grep -q "chat_template" || { echo "missing template: rc $rc, '$err'"; exit 1; }
echo "chat: a model without a chat template is a clear error"
