#!/usr/bin/env bash
# vela's main job: install the packages the `vela` binary needs (scripts/setup.sh --main), build
# only that binary (no tests), then serve the demo model vela trained itself (models/vela-demo,
# see its README.md) at http://127.0.0.1:8000: the chat page, the OpenAI / Anthropic APIs. Shows
# one real exchange through the API, then keeps serving until Ctrl-C.
#
#   scripts/run.sh [cmake options]      VELA_PORT (8000), VELA_MODEL (models/vela-demo),
#                                       VELA_BUILD_DIR (build)
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
MODEL="${VELA_MODEL:-models/vela-demo}"
PORT="${VELA_PORT:-8000}"
BUILD_DIR="${VELA_BUILD_DIR:-build}"
URL="http://127.0.0.1:$PORT"
[ -f "$MODEL/model.safetensors" ] || { echo "[run] no model in $MODEL" >&2; exit 1; }

scripts/setup.sh --main
# The CUDA backend only when there is a GPU to serve on (a toolkit alone would just triple the
# compile time); -DVELA_CUDA=ON|OFF among the arguments decides instead.
CUDA=(-DVELA_CUDA=OFF)
DEVICE=cpu
if nvidia-smi -L > /dev/null 2>&1; then CUDA=(-DVELA_CUDA=AUTO); DEVICE=auto; fi
[[ " $* " == *" -DVELA_CUDA="* ]] && CUDA=() && DEVICE=auto
echo "[run] building the vela binary into $BUILD_DIR ($(nproc) cores)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVELA_BUILD_TESTS=OFF \
  ${CUDA[@]+"${CUDA[@]}"} "$@" > /dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target vela
BIN="$BUILD_DIR/vela"
T_BUILT=$(date +%s)
if [ "$DEVICE" = auto ]; then
  DEVICE=cpu
  "$BIN" info --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["cuda_devices"] else 1)' \
    && DEVICE=cuda
fi

if curl -s -o /dev/null "$URL/health"; then
  echo "[run] something already answers on $URL: stop it or set VELA_PORT" >&2
  exit 1
fi
"$BIN" serve --model "$MODEL" --host 127.0.0.1 --port "$PORT" --served-model-name vela-demo \
  --device "$DEVICE" &
SERVER=$!
trap 'kill "$SERVER" 2> /dev/null; wait "$SERVER" 2> /dev/null; echo; echo "[run] stopped"' EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 600); do
  curl -s -o /dev/null "$URL/health" && break
  kill -0 "$SERVER" 2> /dev/null || { echo "[run] vela serve exited" >&2; exit 1; }
  sleep 0.1
done
curl -s -o /dev/null "$URL/health" || { echo "[run] the server did not come up in 60 s" >&2; exit 1; }
T_UP=$(date +%s)

cat <<EOM

vela is serving $MODEL (a 15.7M-parameter model vela trained itself; what it can do: $MODEL/README.md)
  chat page:  $URL/
  terminal:   $BIN chat --model $MODEL --temperature 0
  API:        curl $URL/v1/chat/completions -H 'Content-Type: application/json' \\
                -d '{"messages": [{"role": "user", "content": "Which book of the Bible is this verse from?\\n\\nThe LORD is my shepherd; I shall not want."}], "max_tokens": 16}'

EOM
ask() {  # ask <question>: one chat completion through the API, question and answer printed
  local body
  body=$(python3 -c 'import json,sys; print(json.dumps({"model": "vela-demo", "max_tokens": 48,
    "temperature": 0, "messages": [{"role": "user", "content": sys.argv[1]}]}))' "$1")
  printf '> %s\n' "$1" | sed '2,$s/^/  /'
  curl -s "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" | python3 -c '
import json, sys
r = json.load(sys.stdin)
if "choices" not in r:
    sys.exit("[run] the server answered: " + json.dumps(r))
u = r["usage"]
print("< " + r["choices"][0]["message"]["content"])
print("  (%d prompt + %d completion tokens)" % (u["prompt_tokens"], u["completion_tokens"]))'
}
echo "[run] one exchange through /v1/chat/completions:"
ask "Which book of the Bible is this verse from?

The LORD is my shepherd; I shall not want."
ask "Which Jane Austen novel is this passage from?

Mr. Darcy had walked away to another part of the room, and Elizabeth was left to her reflections."
echo
echo "[run] build $(( T_BUILT - T0 )) s, serving $(( T_UP - T0 )) s after the start; Ctrl-C stops the server"
wait "$SERVER"
