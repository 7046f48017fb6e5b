#!/usr/bin/env bash
# The demo model (models/vela-demo) as a user meets it: its files and size limits, the ChatML
# template rendered by vela equal to what the SFT data and the scorer assume, one answer through
# `vela chat` (piped stdin) and the same answer through `vela serve`'s /v1/chat/completions, and
# the held-out SFT accuracy of the model card (book and novel tasks) reproduced by `vela eval`
# within 3 points.
# usage: test_demo_model.sh path/to/vela   (run from tests/; exit 77 = skipped: no model)
set -euo pipefail
VELA="$1"
ROOT="$(cd .. && pwd)"
M="$ROOT/models/vela-demo"
[ -f "$M/model.safetensors" ] || { echo "skip: no $M/model.safetensors"; exit 77; }
dir=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$dir"' EXIT

# Files, size, chat template.
python3 - "$M" <<'PY'
import json, os, sys
m = sys.argv[1]
for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
          "generation_config.json", "README.md", "loss_curve.png", "heldout.jsonl"):
    assert os.path.isfile(os.path.join(m, f)), f"{m}: {f} missing"
c = json.load(open(os.path.join(m, "config.json")))
s = json.load(open(os.path.join(m, "train_summary.json")))
assert s["parameters"] <= 25_000_000, s["parameters"]
assert os.path.getsize(os.path.join(m, "model.safetensors")) <= 40 << 20
assert c["torch_dtype"] == "bfloat16", c["torch_dtype"]
assert "<|im_start|>" in json.load(open(os.path.join(m, "tokenizer_config.json")))["chat_template"]
assert open(os.path.join(m, "loss_curve.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
PY

# The template vela renders == the ChatML prompt tools/demo_data.py / demo_sft_eval.py write.
Q='Which book of the Bible is this verse from?

The LORD is my shepherd; I shall not want.'
python3 -c 'import json,sys; json.dump([{"role": "user", "content": sys.argv[1]}], open(sys.argv[2], "w"))' \
  "$Q" "$dir/messages.json"
"$VELA" tokenize chat-template --tokenizer "$M" --messages "$dir/messages.json" --add-generation-prompt \
  > "$dir/rendered.txt"
python3 - "$ROOT/tools" "$dir/messages.json" "$dir/rendered.txt" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import demo_sft_eval
want = demo_sft_eval.chatml(json.load(open(sys.argv[2])))
got = open(sys.argv[3], encoding="utf-8").read()
assert got in (want, want + "\n"), f"vela renders {got!r}, the scorer assumes {want!r}"
PY

# vela chat, stdin piped: the verse question as one line.
reply=$(printf '%s\n/quit\n' "Which book of the Bible is this verse from? The LORD is my shepherd; I shall not want." |
        "$VELA" chat --model "$M" --temperature 0 --max-tokens 16 2>/dev/null)
[ "$reply" = "Psalms" ] || { echo "vela chat answered '$reply', expected 'Psalms'"; exit 1; }

# vela serve: a chat completion with the two-line question.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$VELA" serve --model "$M" --host 127.0.0.1 --port "$port" > "$dir/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 300); do
  curl -s -o /dev/null "http://127.0.0.1:$port/health" && break
  kill -0 "$server" 2>/dev/null || { cat "$dir/serve.log"; exit 1; }
  sleep 0.1
done
python3 - "$port" "$Q" <<'PY'
import json, sys, urllib.request
port, q = sys.argv[1], sys.argv[2]
body = json.dumps({"messages": [{"role": "user", "content": q}], "max_tokens": 16, "temperature": 0})
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body.encode(),
                             {"Content-Type": "application/json"})
r = json.load(urllib.request.urlopen(req, timeout=60))
msg = r["choices"][0]["message"]["content"]
assert msg == "Psalms", f"the server answered {msg!r}"
assert r["choices"][0]["finish_reason"] == "stop", r["choices"][0]
assert r["usage"]["completion_tokens"] <= 4, r["usage"]
PY
kill "$server"; wait "$server" 2>/dev/null || true; server=""
# --dtype auto on the CPU: the bf16 checkpoint stays bf16 where this build and the CPU multiply bf16
# natively (AVX-512 BF16, as `vela info` reports), f32 elsewhere; the start-up line says which.
want=$("$VELA" info --json | python3 -c 'import json, sys
i = json.load(sys.stdin)
native = "avx512bf16" in i["build"]["compiled_cpu_features"] and i["cpu"]["features"]["avx512bf16"]
print("bf16" if native else "f32")')
grep -q "vela-demo ($want on cpu)" "$dir/serve.log" ||
  { echo "expected the demo served in $want on the CPU:"; head -3 "$dir/serve.log"; exit 1; }

# Held-out accuracy by `vela eval` vs the model card's numbers (README).
for task in book novel; do
  "$VELA" eval generate --model "$M" --data "$M/heldout.jsonl" --where task=$task --chat-template \
    --max-tokens 8 --scorer exact_match --no-progress --output "$dir/eval_$task.json" > /dev/null
done
python3 - "$dir" "$M/README.md" <<'PY'
import json, re, sys
got = {t: json.load(open(f"{sys.argv[1]}/eval_{t}.json"))["metrics"] for t in ("book", "novel")}
card = open(sys.argv[2], encoding="utf-8").read()
for task in ("book", "novel"):
    m = re.search(rf"^\| `{task}` \|[^|]*\|[^|]*\| \*\*([0-9.]+)%\*\*", card, re.M)
    assert m, f"README.md has no accuracy row for {task}"
    want, have = float(m.group(1)), 100 * got[task]["exact_match"]
    assert abs(want - have) <= 3.0, f"{task}: {have:.1f}% measured, the card says {want}%"
    print(f"{task}: {have:.1f}% (card {want}%)")
PY
echo "demo model ok"
