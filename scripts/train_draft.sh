#!/usr/bin/env bash
# Makes models/vela-demo-draft: a 2-layer, 128-wide draft model for speculative decoding with
# models/vela-demo as the target (docs/speculative.md). Same tokenizer (the demo model's), trained
# briefly by vela on the Bible part of the demo corpus, on the CPU:
#   corpus   scripts/fetch_corpus.sh (World English Bible + KJV from Debian packages)
#   shards   `vela preprocess` with models/vela-demo's tokenizer (examples/demo/pretrain_prep.json)
#   train    `vela train` (examples/demo/draft_pretrain.json: examples/demo/draft_model.json,
#            AdamW, cosine 3e-3, batch 4 x 512 tokens, 1 thread)
#   export   the last step in bf16 with the target's tokenizer files
#
#   scripts/train_draft.sh        VELA_BIN (build/vela), VELA_DRAFT_WORK (runs/draft),
#                                 VELA_DRAFT_OUT (models/vela-demo-draft), VELA_DRAFT_STEPS (300)
set -euo pipefail
cd "$(dirname "$0")/.."
VELA="${VELA_BIN:-build/vela}"
WORK="${VELA_DRAFT_WORK:-runs/draft}"
OUT="${VELA_DRAFT_OUT:-models/vela-demo-draft}"
STEPS="${VELA_DRAFT_STEPS:-300}"
TARGET=models/vela-demo
[ -x "$VELA" ] || { echo "[draft] $VELA not found: build the vela target first" >&2; exit 1; }
mkdir -p "$WORK"
[ -f "$WORK/corpus/train.jsonl" ] || scripts/fetch_corpus.sh "$WORK/corpus" > /dev/null
for s in train valid; do
  [ -f "$WORK/shards/$s/index.json" ] ||
    "$VELA" preprocess --config examples/demo/pretrain_prep.json --tokenizer "$TARGET" --quiet \
      "$WORK/corpus/$s.jsonl" -o "$WORK/shards/$s"
done
rm -rf "$WORK/train"
"$VELA" train --config examples/demo/draft_pretrain.json --out-dir "$WORK/train" \
  --data.path "$WORK/shards/train" --tokenizer "$TARGET" --max-steps "$STEPS" --progress false
final=$(ls -d "$WORK"/train/step-* | sort | tail -n 1)
rm -rf "$OUT"
"$VELA" convert --model "$final" --out "$OUT" --dtype bf16
for f in tokenizer.json tokenizer_config.json special_tokens_map.json generation_config.json; do
  cp "$TARGET/$f" "$OUT/"
done
echo "[draft] model in $OUT (from $final)" >&2
