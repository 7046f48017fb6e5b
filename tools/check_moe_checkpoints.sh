#!/usr/bin/env bash
# A checkpoint that `vela train` wrote for a mixture-of-experts model loads in transformers and
# gives vela's logits. For each MoE fixture of tests/fixtures/models/ (qwen3_moe, mixtral,
# qwen2_moe_shared: random-init transformers models, tools/make_moe_fixtures.py) it trains a few
# SFT steps from the fixture (`vela train --init-from`, CPU f32, on the toy tokenizer of
# examples/make_rl_toy_data.py: its 27 ids fit the fixtures' 128-token vocabulary), so every
# weight the checkpoint holds was moved by vela's optimizer and written by vela's saver (the
# Hub's per-expert layout); then `vela generate --json --top-logprobs 5` greedy from the
# checkpoint, and tools/check_trained_checkpoint.py loads the checkpoint with
# AutoModelForCausalLM (no missing or unexpected tensor allowed) and compares every step's top-5
# log-probabilities and the greedy tokens.
#
# usage: tools/check_moe_checkpoints.sh path/to/vela [OUT_DIR]     (from the repository root)
#        tools/check_moe_checkpoints.sh --check-only OUT_DIR        (checkpoints made elsewhere)
#   Without torch + transformers (the CPU box) it stops after making the checkpoints and the
#   generate JSON (checkpoints of 0.5-0.7 MB each under OUT_DIR, default .gpu-carry/moe_ckpt);
#   on the GPU machine (torch 2.11, transformers 5.x) it also runs the check. Exit status 1 when
#   a model does not load cleanly, a greedy token differs or a log-probability is off by > 1e-3.
set -euo pipefail
VELA="$1"
OUT="${2:-.gpu-carry/moe_ckpt}"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROMPT=1,9,4,5,7,3,14,2,3
if [ "$VELA" = "--check-only" ]; then
  fail=0 n=0
  for gen in "$OUT"/*.gen.json; do
    [ -f "$gen" ] || continue
    n=$((n + 1))
    python3 "$ROOT/tools/check_trained_checkpoint.py" "${gen%.gen.json}/step-00000004" "$gen" "$PROMPT" || fail=1
  done
  [ $n -gt 0 ] || { echo "no *.gen.json under $OUT"; exit 1; }
  exit $fail
fi
mkdir -p "$OUT"
python3 "$ROOT/examples/make_rl_toy_data.py" "$OUT/data" >/dev/null
sed "s#build/rl_toy/tokenizer#$OUT/data/tokenizer#" "$ROOT/examples/rl_toy_base_prep.json" > "$OUT/prep.json"
"$VELA" preprocess --config "$OUT/prep.json" "$OUT/data/base.jsonl" -o "$OUT/shards" --quiet >/dev/null

have_torch=0
python3 -c "import torch, transformers" 2>/dev/null && have_torch=1
fail=0
for name in qwen3_moe mixtral qwen2_moe_shared; do
  fixture="$ROOT/tests/fixtures/models/$name"
  [ -f "$fixture/model.safetensors" ] || { echo "$name: no fixture at $fixture, skipped"; continue; }
  run="$OUT/$name"
  rm -rf "$run"
  "$VELA" train --init-from "$fixture" --tokenizer "$OUT/data/tokenizer" --strategy sft \
    --data.path "$OUT/shards" --out-dir "$run" --max-steps 4 --save-every 4 --log-every 1 \
    --batch-size 4 --lr 0.003 --no-progress --threads 1 >"$run.train.log" 2>&1 ||
    { tail -5 "$run.train.log"; echo "$name: vela train failed"; fail=1; continue; }
  ck="$run/step-00000004"
  rm -f "$ck/optimizer.safetensors"  # not needed to load; keeps the carried copy small
  "$VELA" generate --model "$ck" --prompt-ids "$PROMPT" --max-tokens 8 --temperature 0 \
    --ignore-eos --json --top-logprobs 5 > "$run.gen.json"
  loss=$(python3 -c "import json; v=[json.loads(l)['loss'] for l in open('$run/metrics.jsonl')]; print(f'{v[0]:.3f} -> {v[-1]:.3f}')")
  echo "$name: trained 4 steps from the fixture (loss $loss), checkpoint $ck ($(du -sk "$ck" | cut -f1) KB)"
  if [ $have_torch = 1 ]; then
    python3 "$ROOT/tools/check_trained_checkpoint.py" "$ck" "$run.gen.json" "$PROMPT" || fail=1
  fi
done
[ $have_torch = 1 ] || echo "no torch/transformers here: checkpoints made, transformers check skipped"
exit $fail
