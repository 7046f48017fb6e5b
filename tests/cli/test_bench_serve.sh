#!/usr/bin/env bash
# End-to-end `vela bench serve` against `vela serve` on a CPU fixture model (qwen3_qknorm with a
# 128-token character tokenizer and a small chat template): closed loop and open loop, random and
# file prompts, both APIs; the JSON report's counts must add up (every request completed, output
# tokens within the requested ranges, one TTFT per request); a wrong model name is reported as
# failed requests (exit 1); bad flags and an unreachable server are clear errors.
# usage: test_bench_serve.sh path/to/vela   (run from tests/)
set -euo pipefail
VELA="$1"
W=$(mktemp -d)
M="$W/model"
mkdir -p "$M"
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

"$VELA" serve --model "$M" --port 0 --max-batch 8 --served-model-name fixture 2>"$W/serve.log" &
PID=$!
trap 'kill -9 $PID 2>/dev/null; wait $PID 2>/dev/null || true; rm -rf "$W"' EXIT
PORT=""
for _ in $(seq 1 150); do
  PORT=$(sed -n 's|.* on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$W/serve.log" | head -n 1)
  [ -n "$PORT" ] && break
  kill -0 "$PID" 2>/dev/null || { cat "$W/serve.log"; echo "server died"; exit 1; }
  sleep 0.2
done
[ -n "$PORT" ] || { cat "$W/serve.log"; echo "server did not start"; exit 1; }
URL="http://127.0.0.1:$PORT"

# Closed loop, random prompts, completions API (the model name comes from /v1/models).
"$VELA" bench serve --url "$URL" --concurrency 4 --num-requests 12 --prompt-words 2:4 \
  --output-tokens 4:8 --seed 1 --out "$W/closed.json" > "$W/closed.txt"
grep -q "request throughput" "$W/closed.txt"
# Open loop (Poisson) with a prompt file, chat API (messages lines and prompt lines), capped.
printf '%s\n' '{"messages": [{"role": "user", "content": "hello"}], "max_tokens": 5}' \
  '{"prompt": "good day", "max_tokens": 6}' '' '{"prompt": "bye"}' > "$W/prompts.jsonl"
"$VELA" bench serve --url "$URL/v1" --api chat --model fixture --request-rate 40 \
  --max-concurrency 3 --num-requests 9 --prompt-file "$W/prompts.jsonl" --output-tokens 7 \
  --temperature 0.9 --out "$W/open.json" > /dev/null
python3 - "$W/closed.json" "$W/open.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); o = json.load(open(sys.argv[2]))
assert c["mode"] == "closed_loop" and c["concurrency"] == 4 and c["model"] == "fixture", c
assert c["completed"] == 12 and c["failed"] == 0 and c["errors"] == {}, c
assert 12 * 4 <= c["output_tokens_total"] <= 12 * 8, c["output_tokens_total"]
assert c["ttft_ms"]["count"] == 12 and c["itl_ms"]["count"] > 0, c
assert c["ttft_ms"]["p50"] <= c["ttft_ms"]["p90"] <= c["ttft_ms"]["p99"] <= c["ttft_ms"]["max"]
assert c["peak_concurrency"] == 4 and c["input_tokens"] > 0
assert abs(c["output_throughput"] - c["output_tokens_total"] / c["duration_s"]) < 1e-6
# The server's engine step times (GET /stats), since the server started: 12 prompts, >= 4 tokens.
st = c["server_step_ms"]
assert st["decode"]["count"] + st["mixed"]["count"] + st["prefill"]["count"] >= 4 * 3, st
assert 0 < st["decode"]["p50"] <= st["decode"]["p99"] <= st["decode"]["max"], st
# Where the loop's time went (StepPhases): the phases up to `process` add up to a decode step's
# mean wall time (`finish` and `between` come after the step's clock stops).
ph = c["server_step_phase_ms"]["decode"]
names = ["schedule", "bind", "launch", "publish", "sample", "process"]
assert ph["steps"] == st["decode"]["count"], ph
assert all(ph[n] >= 0 for n in names + ["finish", "between"]), ph
assert abs(sum(ph[n] for n in names) - st["decode"]["mean"]) <= 0.01 * st["decode"]["mean"], (ph, st)
assert "server_forward_ms" not in c  # the CPU server does not time forwards on a stream
assert o["mode"] == "open_loop" and o["request_rate"] == 40 and o["completed"] == 9, o
assert o["peak_concurrency"] <= 3 and o["failed"] == 0
# max_tokens from the file (5, 6) or --output-tokens (7), three times each, ignore_eos on.
assert o["output_tokens_total"] <= 3 * (5 + 6 + 7), o["output_tokens_total"]
print("bench serve: closed and open loop reports add up")
PY

# A model the server does not serve: every request fails, reported, exit 1.
set +e
"$VELA" bench serve --url "$URL" --model nope --concurrency 2 --num-requests 3 --prompt-words 2 \
  --output-tokens 2 --out "$W/bad.json" > "$W/bad.txt" 2>&1; rc=$?
set -e
[ "$rc" -eq 1 ] || { cat "$W/bad.txt"; echo "expected exit 1 for failed requests, got $rc"; exit 1; }
python3 -c "import json,sys; j=json.load(open('$W/bad.json')); assert j['failed']==3 and any('HTTP 404' in k for k in j['errors']), j"

# Bad input: clear errors.
expect_error() {
  local want="$1"; shift
  set +e
  err=$("$VELA" bench serve "$@" 2>&1 >/dev/null); rc=$?
  set -e
  [ "$rc" -ne 0 ] && printf '%s' "$err" | grep -q -- "$want" || { echo "expected '$want' from $*, got rc=$rc: $err"; exit 1; }
}
expect_error "not both" --url "$URL" --concurrency 2 --request-rate 3
expect_error "output-tokens" --url "$URL" --output-tokens 9:3
expect_error "api must be" --url "$URL" --api embeddings
expect_error "cannot reach" --url http://127.0.0.1:1 --num-requests 1
printf '{"prompt": 3}\n' > "$W/badprompts.jsonl"
expect_error "badprompts.jsonl:1" --url "$URL" --model fixture --prompt-file "$W/badprompts.jsonl"
echo "bench serve: OK"

# Serve config files: a key an earlier version used names its replacement, an unknown key is named.
expect_config_error() {
  local json="$1" want="$2"
  echo "$json" > "$W/serve.json"
  set +e
  err=$("$VELA" serve --model "$M" --config "$W/serve.json" 2>&1 >/dev/null); rc=$?
  set -e
  [ "$rc" -ne 0 ] && printf '%s' "$err" | grep -q -- "$want" || { echo "expected '$want' for $json, got rc=$rc: $err"; exit 1; }
}
expect_config_error '{"max_pending_connections": 64}' "'max_pending_connections' was retired.*'max_connections'"
expect_config_error '{"max_pendin_requests": 64}' "unknown key 'max_pendin_requests'"
echo "serve config: retired and unknown keys are clear errors"
