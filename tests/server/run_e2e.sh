#!/usr/bin/env bash
# Server end-to-end tests against a running `vela serve` (loopback only).
#   run_e2e.sh clients|fuzz|load|web_ui|structured|llama3_tools VELA MAKE_TINY_MODEL WORKDIR
# (run from tests/). A tiny random model with the Qwen3 tokenizer's vocabulary and chat template is
# generated into WORKDIR once; llama3_tools gets its own with the Llama 3.1 tokenizer (special
# tokens renamed as in Llama 3.1, tools/make_llama31_tokenizer.mjs) and the repository's Llama
# 3.1-style tool template, so the server picks the llama3_json tool-call dialect. Each test starts its own server on a free port, runs its driver (node with the
# official openai / @anthropic-ai/sdk clients from .cache/assets, or headless Chromium), then
# sends SIGTERM and requires a clean exit. Exit 77 = skipped (assets or tools missing).
set -euo pipefail
WHICH="$1" VELA="$2" MAKE_MODEL="$3" WORK="$4"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ASSETS="${VELA_ASSETS:-$ROOT/.cache/assets}"
TOK="$ASSETS/tokenizers/qwen3"
# With VELA_REQUIRE_ASSETS=1 (scripts/test.sh) missing assets fail instead of skipping.
skip() {
  if [ -n "${VELA_REQUIRE_ASSETS:-}" ] && [ "${VELA_REQUIRE_ASSETS}" != 0 ]; then
    echo "FAIL (VELA_REQUIRE_ASSETS is set): $*"; exit 1
  fi
  echo "SKIP: $*"; exit 77
}
[ -f "$TOK/tokenizer.json" ] || skip "no Qwen3 tokenizer (run scripts/fetch_assets.sh)"
command -v node >/dev/null || skip "node not installed"
if [ "$WHICH" != web_ui ]; then
  [ -f "$ASSETS/node_modules/openai/package.json" ] || skip "npm clients missing (scripts/fetch_assets.sh)"
  [ -f "$ASSETS/node_modules/@anthropic-ai/sdk/package.json" ] || skip "npm clients missing"
  if [ "$WHICH" = structured ] || [ "$WHICH" = llama3_tools ]; then
    [ -f "$ASSETS/node_modules/zod/package.json" ] && [ -f "$ASSETS/node_modules/ajv/package.json" ] \
      || skip "zod / ajv missing (scripts/fetch_assets.sh)"
  fi
fi
CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
[ "$WHICH" != web_ui ] || [ -n "$CHROMIUM" ] || skip "chromium not installed (scripts/setup.sh)"

mkdir -p "$WORK"
MODEL="$WORK/model"
if [ "$WHICH" = llama3_tools ]; then
  [ -f "$ASSETS/tokenizers/llama3_1/tokenizer.json" ] || skip "no Llama 3.1 tokenizer (run scripts/fetch_assets.sh)"
  [ -f "$ASSETS/node_modules/@huggingface/jinja/package.json" ] && [ -f "$ASSETS/node_modules/tokenizers/package.json" ] \
    || skip "@huggingface/jinja / tokenizers missing (scripts/fetch_assets.sh)"
  # VELA_LLAMA3_TEMPLATE: another Llama 3 tool template to serve (e.g. Meta's own, if you have it).
  TPL="${VELA_LLAMA3_TEMPLATE:-$HERE/../tokenizer/chat_cases/templates/llama31_style_tools.jinja}"
  MODEL="$WORK/model_llama3"
  TOK="$WORK/tokenizer_llama31"
  if [ ! -f "$MODEL/model.safetensors" ] || [ "$TPL" -nt "$MODEL/tokenizer_config.json" ] \
     || ! cmp -s "$TPL" "$MODEL/template.jinja"; then
    node "$HERE/tools/make_llama31_tokenizer.mjs" "$ASSETS/tokenizers/llama3_1" "$TPL" "$TOK" >/dev/null
    "$MAKE_MODEL" "$TOK" "$MODEL.tmp.$$" --max-context 4096 >/dev/null
    cp "$TPL" "$MODEL.tmp.$$/template.jinja"
    rm -rf "$MODEL"; mv "$MODEL.tmp.$$" "$MODEL"
  fi
  # An unknown --tool-call-parser is a clear startup error.
  if out=$("$VELA" serve --model "$MODEL" --port 0 --tool-call-parser nope 2>&1); then
    echo "vela serve accepted --tool-call-parser nope"; exit 1
  fi
  echo "$out" | grep -q "unknown tool-call parser 'nope' (expected hermes or llama3_json)" \
    || { echo "unclear error for --tool-call-parser nope: $out"; exit 1; }
elif [ ! -f "$MODEL/model.safetensors" ]; then
  "$MAKE_MODEL" "$TOK" "$MODEL.tmp.$$" --max-context 2048 >/dev/null
  rm -rf "$MODEL"; mv "$MODEL.tmp.$$" "$MODEL"
fi

KEY="e2e-$RANDOM$RANDOM"
NAME=tiny-qwen3
[ "$WHICH" = llama3_tools ] && NAME=tiny-llama3
ARGS=(--model "$MODEL" --host 127.0.0.1 --port 0 --served-model-name "$NAME")
case "$WHICH" in
  clients) ARGS+=(--api-key "$KEY" --max-body-bytes 1048576) ;;
  structured) ARGS+=(--api-key "$KEY") ;;
  llama3_tools) ARGS+=(--api-key "$KEY") ;;
  fuzz)    ARGS+=(--api-key "$KEY" --max-context 256 --max-body-bytes 262144) ;;
  load)    ARGS+=(--api-key "$KEY" --max-context 512 --max-batch 64) ;;
  web_ui)  ARGS+=(--api-key "$KEY") ;;
  *) echo "unknown test $WHICH"; exit 2 ;;
esac
LOG="$WORK/serve_$WHICH.log"
# llama3_tools checks the startup line that names the detected tool-call dialect (info level).
[ "$WHICH" = llama3_tools ] && export VELA_LOG_LEVEL="${VELA_LOG_LEVEL:-info}"
"$VELA" serve "${ARGS[@]}" 2>"$LOG" &
PID=$!
cleanup() { kill -9 "$PID" 2>/dev/null || true; }
trap cleanup EXIT
PORT=""
for _ in $(seq 1 300); do
  PORT=$(sed -n 's|.* on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$LOG" | head -n 1)
  [ -n "$PORT" ] && break
  kill -0 "$PID" 2>/dev/null || { cat "$LOG"; echo "server died"; exit 1; }
  sleep 0.2
done
[ -n "$PORT" ] || { cat "$LOG"; echo "server did not start"; exit 1; }
URL="http://127.0.0.1:$PORT"
echo "[e2e] $WHICH: vela serve on $URL (pid $PID)"

rc=0
if [ "$WHICH" = web_ui ]; then
  CHROMIUM="$CHROMIUM" VELA_URL="$URL" VELA_WORK="$WORK" VELA_API_KEY="$KEY" VELA_MODEL_DIR="$MODEL" \
    timeout 150 node --experimental-websocket "$HERE/e2e/web_ui.mjs" || rc=$?
else
  VELA_URL="$URL" VELA_API_KEY="$KEY" VELA_MODEL="$NAME" VELA_WORK="$WORK" VELA_MODEL_DIR="$MODEL" \
    NODE_PATH="$ASSETS/node_modules" node "$HERE/e2e/$WHICH.mjs" || rc=$?
fi

# Graceful shutdown: SIGTERM -> exit 0 within the grace period.
kill -TERM "$PID"
for _ in $(seq 1 150); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$PID" 2>/dev/null; then echo "server still running 15 s after SIGTERM"; rc=1; else
  src=0; wait "$PID" || src=$?
  [ "$src" -eq 0 ] || { echo "server exited with $src after SIGTERM"; rc=1; }
fi
trap - EXIT
if [ "$WHICH" = llama3_tools ]; then
  grep -q "tool calls: llama3_json (from the chat template)" "$LOG" \
    || { echo "the server did not detect the llama3_json dialect:"; grep "tool calls" "$LOG"; rc=1; }
fi
grep -q "internal error" "$LOG" && { echo "server logged internal errors:"; grep "internal error" "$LOG" | head; rc=1; }
[ "$rc" -eq 0 ] && echo "[e2e] $WHICH: OK" || tail -n 20 "$LOG"
exit "$rc"
