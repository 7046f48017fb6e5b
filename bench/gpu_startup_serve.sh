#!/usr/bin/env bash
# Start-up and 64-stream serving of a Qwen3-1.7B-shaped bf16 checkpoint on the GPU machine (issue
# 16 items 4 and 6): makes the checkpoint (tools/make_bench_checkpoint.py, random weights, the real
# Qwen3 tokenizer), measures process start -> first token of `vela generate` / `vela serve`
# (bench/startup_bench.py), then `vela bench serve` with 64 streams against `vela serve` at a few
# step budgets, and the engine's standalone B=64 decode rate (`vela bench engine --cases batch64`).
# usage (repository root, on the GPU machine): OUT=dir VELA=path/to/vela TOK=tokenizer_dir \
#   bench/gpu_startup_serve.sh
set -uo pipefail
OUT="${OUT:-/tmp/vela-startup}"
VELA="${VELA:-build-gpu/vela}"
TOK="${TOK:-.cache/assets/tokenizers/qwen3}"
CK=/tmp/qwen3-1.7b
mkdir -p "$OUT"
python3 tools/make_bench_checkpoint.py --shape qwen3-1.7b --tokenizer "$TOK" --out "$CK" 2>&1 | tail -2
python3 bench/startup_bench.py --vela "$VELA" --model "$CK" --runs "${RUNS:-3}" --tokens 16 \
  --out "$OUT/startup_h200.json" 2>&1 | tee "$OUT/startup_h200.log"
for budget in ${BUDGETS:-1024 512 2048}; do
  "$VELA" serve --model "$CK" --device cuda --dtype bf16 --max-batch 64 --port 8200 --no-web-ui \
    --max-tokens-per-step "$budget" > "$OUT/serve_$budget.log" 2>&1 &
  pid=$!
  for i in $(seq 1 600); do curl -sf http://127.0.0.1:8200/health > /dev/null && break; sleep 0.05; done
  "$VELA" bench serve --url http://127.0.0.1:8200 --model qwen3-1.7b --concurrency 64 \
    --num-requests "${NREQ:-192}" --prompt-words 100:300 --output-tokens 256 \
    --out "$OUT/serve64_budget$budget.json" > "$OUT/serve64_budget$budget.txt" 2>&1
  echo "== budget $budget"; cat "$OUT/serve64_budget$budget.txt"
  kill "$pid"; wait "$pid"
done
[ -n "${SKIP_ENGINE:-}" ] || timeout 120 "$VELA" bench engine --config "$CK/config.json" --dtype bf16 --cases batch64 \
  --json "$OUT/engine_b64.json" 2>&1 | tee "$OUT/engine_b64.txt" | tail -8
