#!/usr/bin/env bash
# The demo model's GPU run in one call (scripts/train_demo.sh on the H200): build the vela target
# with CUDA, probe the training speed for 20 steps, size the pretraining to a time budget
# (at most examples/demo/pretrain.json's max_steps), then pretrain, SFT, export and evaluate.
# The data (runs/demo: shards, tokenizer, model_config.json, data/sft_valid.jsonl) is made on the
# CPU machine by scripts/demo_data.sh and carried along. Results go to $OUT:
#   model.tar.part-*   the exported model directory (split below the tool's 16 MiB per file)
#   train.log, metrics.tar.gz (both runs' metrics.jsonl, configs, sft_eval.json, stage times)
# usage (GPU machine, repository root): OUT=dir PRETRAIN_BUDGET_S=240 tools/demo_gpu.sh
# Before, on the CPU machine: scripts/demo_data.sh and tools/make_gpu_deps.sh (carry .deps-lite).
set -uo pipefail
OUT="${OUT:-/tmp/vela-demo}"
mkdir -p "$OUT"
source tools/gpu_deps.sh   # .deps-lite (tools/make_gpu_deps.sh) where the packages are missing
t0=$(date +%s)
{ cmake -S . -B build-gpu -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release \
    -DVELA_BUILD_TESTS=OFF -DVELA_BUILD_BENCH=OFF && ninja -C build-gpu -j16 vela; } > "$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
echo "build ok in $(( $(date +%s) - t0 )) s"
export VELA_BIN=build-gpu/vela VELA_DEMO_DEVICE=cuda
W=runs/demo
# Speed probe: 20 steps of the real config.
build-gpu/vela train --config examples/demo/pretrain.json --out-dir /tmp/probe --model $W/model_config.json \
  --data.path $W/shards/pretrain_train --data.validation-path "" --tokenizer $W/tokenizer \
  --max-steps 20 --save-final false --log-every 5 > "$OUT/probe.log" 2>&1 || { tail -20 "$OUT/probe.log"; exit 1; }
tps=$(python3 -c "import json; r=[json.loads(l) for l in open('/tmp/probe/metrics.jsonl')]; print(int(sum(x['tokens_per_second'] for x in r[-2:])/2))")
max=$(python3 -c "import json; print(json.load(open('examples/demo/pretrain.json'))['max_steps'])")
steps=$(python3 -c "print(max(100, min($max, int(${PRETRAIN_BUDGET_S:-240} * $tps / (64 * 512)) // 100 * 100)))")
echo "probe: $tps tok/s -> $steps pretraining steps"
VELA_DEMO_PRETRAIN_STEPS=$steps VELA_DEMO_STAGES="pretrain sft export eval" scripts/train_demo.sh > "$OUT/train.log" 2>&1
rc=$?
echo "train_demo rc=$rc"; grep -E "validation|done|exact|^(book|novel|define|jargon|all) |\[demo\]" "$OUT/train.log" | tail -40
M=$W/vela-demo
if [ -f $M/model.safetensors ]; then
  tar -C $W -cf - vela-demo | split -b 15m - "$OUT/model.tar.part-"
fi
tar -C $W -czf "$OUT/metrics.tar.gz" pretrain/metrics.jsonl pretrain/train_config.json sft/metrics.jsonl \
  sft/train_config.json sft_eval.json stage_seconds.txt 2>/dev/null
ls -la "$OUT"
exit $rc
