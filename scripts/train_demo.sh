#!/usr/bin/env bash
# Re-makes the demo model (models/vela-demo) end to end, on a CUDA GPU or the CPU:
#   data      scripts/demo_data.sh: public-domain text from Debian packages, the SFT questions,
#             the BPE vocabulary (`vela tokenize train`) and the token shards (`vela preprocess`)
#   pretrain  `vela train` from scratch on the text (examples/demo/pretrain.json)
#   sft       `vela train --init-from` the last pretraining step on the chat set (examples/demo/sft.json)
#   export    the last SFT step in bf16 (`vela convert`) with its tokenizer, chat template and
#             generation_config.json, plus train_summary.json and loss_curve.png
#   eval      the held-out SFT questions by exact match (tools/demo_sft_eval.py)
#
#   scripts/train_demo.sh                      everything, into runs/demo/ (model: runs/demo/vela-demo)
#   VELA_DEMO_STAGES="pretrain sft export eval" scripts/train_demo.sh   (data already made)
#
# Environment: VELA_BIN (default build/vela), VELA_DEMO_WORK (runs/demo), VELA_DEMO_OUT
# (WORK/vela-demo), VELA_DEMO_DEVICE (cuda when the build sees a GPU, else cpu), VELA_DEMO_DTYPE
# (bf16 on cuda, f32 on cpu), VELA_DEMO_PRETRAIN_STEPS / VELA_DEMO_SFT_STEPS (override max_steps),
# VELA_DEMO_BATCH (both stages' batch size), VELA_DEMO_EVAL_LIMIT (questions per task), and
# VELA_DEMO_QUICK=1 (validate on 2 batches at the middle and the end, log every step, 1 warmup step).
# On the 2-core CPU the full run takes days (the published model: minutes on an H200), so
#   VELA_DEMO_QUICK=1 VELA_DEMO_PRETRAIN_STEPS=4 VELA_DEMO_SFT_STEPS=2 VELA_DEMO_BATCH=2 scripts/train_demo.sh
# checks the whole path on a CPU in a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
VELA="${VELA_BIN:-build/vela}"
WORK="${VELA_DEMO_WORK:-runs/demo}"
OUT="${VELA_DEMO_OUT:-$WORK/vela-demo}"
STAGES="${VELA_DEMO_STAGES:-data pretrain sft export eval}"
[ -x "$VELA" ] || { echo "[demo] $VELA not found: build it first (scripts/build.sh, target vela)" >&2; exit 1; }
if [ -z "${VELA_DEMO_DEVICE:-}" ]; then
  VELA_DEMO_DEVICE=cpu
  "$VELA" info --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["cuda_devices"] else 1)' \
    && VELA_DEMO_DEVICE=cuda
fi
DEVICE="$VELA_DEMO_DEVICE"
DTYPE="${VELA_DEMO_DTYPE:-$([ "$DEVICE" = cpu ] && echo f32 || echo bf16)}"
has() { [[ " $STAGES " == *" $1 "* ]]; }
now() { date +%s.%N; }
secs() { python3 -c "print(round($2 - $1, 1))"; }
latest() { ls -d "$1"/step-* 2>/dev/null | sort | tail -n 1; }
echo "[demo] stages: $STAGES; device $DEVICE ($DTYPE); work dir $WORK" >&2
mkdir -p "$WORK"
TIMES="$WORK/stage_seconds.txt"
has data && : > "$TIMES"

if has data; then
  t0=$(now)
  VELA_BIN="$VELA" scripts/demo_data.sh "$WORK"
  echo "data $(secs "$t0" "$(now)")" >> "$TIMES"
fi

overrides=()
[ -n "${VELA_DEMO_BATCH:-}" ] && overrides+=(--batch-size "$VELA_DEMO_BATCH")
if has pretrain; then
  t0=$(now)
  rm -rf "$WORK/pretrain"
  steps=()
  [ -n "${VELA_DEMO_PRETRAIN_STEPS:-}" ] && steps=(--max-steps "$VELA_DEMO_PRETRAIN_STEPS")
  [ -n "${VELA_DEMO_QUICK:-}" ] && steps+=(--eval-every "$(( (${VELA_DEMO_PRETRAIN_STEPS:-2} + 1) / 2 ))"
    --eval-batches 2 --log-every 1 --schedule.warmup-steps 1)
  "$VELA" train --config examples/demo/pretrain.json --out-dir "$WORK/pretrain" \
    --model "$WORK/model_config.json" --data.path "$WORK/shards/pretrain_train" \
    --data.validation-path "$WORK/shards/pretrain_valid" --tokenizer "$WORK/tokenizer" \
    --device "$DEVICE" --dtype "$DTYPE" ${overrides[@]+"${overrides[@]}"} ${steps[@]+"${steps[@]}"}
  echo "pretrain $(secs "$t0" "$(now)")" >> "$TIMES"
fi

if has sft; then
  t0=$(now)
  base=$(latest "$WORK/pretrain")
  [ -n "$base" ] || { echo "[demo] no pretraining checkpoint in $WORK/pretrain" >&2; exit 1; }
  rm -rf "$WORK/sft"
  steps=()
  [ -n "${VELA_DEMO_SFT_STEPS:-}" ] && steps=(--max-steps "$VELA_DEMO_SFT_STEPS")
  [ -n "${VELA_DEMO_QUICK:-}" ] && steps+=(--eval-every "${VELA_DEMO_SFT_STEPS:-1}" --eval-batches 2
    --log-every 1 --schedule.warmup-steps 1)
  "$VELA" train --config examples/demo/sft.json --out-dir "$WORK/sft" --init-from "$base" \
    --data.path "$WORK/shards/sft_train" --data.validation-path "$WORK/shards/pretrain_valid" \
    --tokenizer "$WORK/tokenizer" --device "$DEVICE" --dtype "$DTYPE" \
    ${overrides[@]+"${overrides[@]}"} ${steps[@]+"${steps[@]}"}
  echo "sft $(secs "$t0" "$(now)")" >> "$TIMES"
fi

if has export; then
  final=$(latest "$WORK/sft")
  [ -n "$final" ] || { echo "[demo] no SFT checkpoint in $WORK/sft" >&2; exit 1; }
  rm -rf "$OUT"
  "$VELA" convert --model "$final" --out "$OUT" --dtype bf16
  for f in tokenizer.json tokenizer_config.json special_tokens_map.json generation_config.json; do
    cp "$final/$f" "$OUT/"
  done
  python3 tools/demo_summary.py --work "$WORK" --out "$OUT" --device "$DEVICE" --dtype "$DTYPE"
  python3 tools/plot_loss.py --out "$OUT/loss_curve.png" \
    "pretrain=$WORK/pretrain/metrics.jsonl" "SFT=$WORK/sft/metrics.jsonl"
fi

if has eval; then
  limit=()
  [ -n "${VELA_DEMO_EVAL_LIMIT:-}" ] && limit=(--limit-per-task "$VELA_DEMO_EVAL_LIMIT")
  python3 tools/demo_sft_eval.py --vela "$VELA" --model "$OUT" --data "$WORK/data/sft_valid.jsonl" \
    --device "$DEVICE" --json "$WORK/sft_eval.json" --show 2 ${limit[@]+"${limit[@]}"}
fi
echo "[demo] model in $OUT" >&2
