#!/usr/bin/env bash
# Issue 17's draft-model benchmark on the H200: a bench-1b-shaped target (24 x 1536, 0.9B, vocab
# 8192) and a 4-layer draft of the same width (0.2B), both trained briefly by vela on the demo
# corpus with vela-demo's tokenizer, then `vela bench spec` at batch 1 (ngram and draft, k 2 / 4).
# The data (runs/pair: shards/pretrain_train, tokenizer) is made on the CPU machine by
#   VELA_DEMO_TOKENIZER=models/vela-demo scripts/demo_data.sh runs/pair
# and carried along. usage (GPU machine, repository root, build-gpu/vela built):
#   OUT=dir TARGET_STEPS=400 DRAFT_STEPS=400 tools/gpu_spec_pair.sh
set -uo pipefail
OUT="${OUT:-/tmp/spec-pair}"; mkdir -p "$OUT"
V=build-gpu/vela; W=runs/pair
T0=$(date +%s); el() { echo "[pair t+$(( $(date +%s) - T0 ))s] $*"; }
train() {  # name model-config steps lr
  rm -rf "$W/$1"
  $V train --config bench/configs/spec_pair_train.json --out-dir "$W/$1" --model "$2" \
    --data.path $W/shards/pretrain_train --tokenizer $W/tokenizer --max-steps "$3" --lr "$4" \
    --progress false > "$OUT/train_$1.log" 2>&1
  local rc=$?
  el "train $1 rc=$rc: $(grep -E 'step [0-9]+/' "$OUT/train_$1.log" | tail -1)"
  return $rc
}
train target bench/configs/spec_pair_target.json "${TARGET_STEPS:-400}" 6e-4 || exit 1
train draft bench/configs/spec_pair_draft.json "${DRAFT_STEPS:-400}" 1.5e-3 || exit 1
tgt=$(ls -d $W/target/step-* | sort -V | tail -1); dft=$(ls -d $W/draft/step-* | sort -V | tail -1)
timeout 240 $V bench spec --model "$tgt" --device cuda --dtype bf16 --decode 256 --reps 2 \
  --settings "ngram,k=4;draft=$dft,k=2;draft=$dft,k=4" --json "$OUT/spec_pair.json" > "$OUT/spec_pair.txt" 2>&1
el "bench spec rc=$?"; cat "$OUT/spec_pair.txt"
