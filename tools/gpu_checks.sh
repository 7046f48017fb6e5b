#!/usr/bin/env bash
# Everything the GPU machine checks in one call (see docs/engine.md): build with CUDA for sm_90,
# run every CUDA test, the CUDA training tests, the engine benchmark and the gradient fixtures.
# Logs and results go to $OUT (the device tool brings them back).
# usage (on the GPU machine, from the repository root): OUT=dir tools/gpu_checks.sh [what...]
#   what: build tests bench grads profile train trainprof ckpt (default: build tests bench grads)
set -uo pipefail
OUT="${OUT:-/tmp/vela-gpu}"
mkdir -p "$OUT"
WHAT="${*:-build tests bench grads}"
source tools/gpu_deps.sh   # .deps-lite (tools/make_gpu_deps.sh) where the packages are missing
has() { [[ " $WHAT " == *" $1 "* ]]; }
if has build; then
  { cmake -S . -B build-gpu -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release &&
    ninja -C build-gpu -j16 vela test_cuda test_train test_engine; } > "$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
  echo "build ok"
fi
if has grads; then
  python3 tools/make_grad_fixtures.py --out /tmp/grads > "$OUT/grads.log" 2>&1 && echo "grads ok" || tail -20 "$OUT/grads.log"
  python3 tools/make_moe_fixtures.py --grads-only --grads /tmp/grads > "$OUT/moe_grads.log" 2>&1 &&
    echo "moe grads ok" || tail -20 "$OUT/moe_grads.log"
  tar -C /tmp -czf "$OUT/grads.tar.gz" grads
fi
if has train && [ -f .gpu-carry/train_bench1b.json ]; then
  # bench-1b, batch 8 x 2048, bf16 compute with fp32 master weights (config and shards carried in).
  VELA_LOG_LEVEL=debug timeout 200 build-gpu/vela train --config .gpu-carry/train_bench1b.json \
    > "$OUT/train_bench1b.log" 2>&1
  echo "train bench-1b rc=$?"; grep -E "step [0-9]|phases|done" "$OUT/train_bench1b.log" | tail -12
  if [ -f .gpu-carry/train_bench1b_muon.json ]; then
    VELA_LOG_LEVEL=debug timeout 200 build-gpu/vela train --config .gpu-carry/train_bench1b_muon.json \
      > "$OUT/train_bench1b_muon.log" 2>&1
    echo "train bench-1b muon rc=$?"; grep -E "step [0-9]|phases|done" "$OUT/train_bench1b_muon.log" | tail -6
  fi
fi
if has ckpt && [ -d .gpu-carry/shards2048 ]; then
  # A small model trained by vela (CPU, f32) must load in transformers and agree with vela.
  timeout 200 build-gpu/vela train --config examples/pretrain_small.json --data.path .gpu-carry/shards2048 \
    --data.validation_path "" --data.seq_len 2048 --data.batch_size 2 --max_steps 20 --eval_every 0 \
    --save_every 0 --out_dir /tmp/run-small --threads 16 > "$OUT/train_small.log" 2>&1
  echo "train small rc=$?"; tail -3 "$OUT/train_small.log"
  CK=$(ls -d /tmp/run-small/step-* | tail -1)
  build-gpu/vela generate --model "$CK" --prompt-ids 5,17,300,42,7 --max-tokens 12 --temperature 0 \
    --ignore-eos --json --top-logprobs 1 > "$OUT/gen_small.json" && \
    python3 tools/check_trained_checkpoint.py "$CK" "$OUT/gen_small.json" 5,17,300,42,7 2>&1 | tail -3
fi
if has trainprof && [ -f .gpu-carry/bench1b_4layers.json ]; then
  # Where a training step's GPU time goes: ncu per-kernel totals over one step of a 4-layer
  # bench-1b (same shapes per layer, 6x fewer layers), batch 8 x 2048.
  timeout 400 ncu --csv --metrics gpu__time_duration.sum build-gpu/vela train \
    --config .gpu-carry/train_bench1b.json --model .gpu-carry/bench1b_4layers.json --max_steps 1 \
    > "$OUT/ncu_train.csv" 2> "$OUT/ncu_train.err"
  echo "ncu train rc=$?"
  python3 tools/ncu_summary.py "$OUT/ncu_train.csv" "ncu train (one step, 4 layers)" 30
fi
cd tests
if has tests; then
  timeout 300 ../build-gpu/tests/test_cuda > "$OUT/test_cuda.log" 2>&1
  echo "test_cuda rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_cuda.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \]|Failure|bf16 GPU vs" "$OUT/test_cuda.log" | head -30
  timeout 120 ../build-gpu/tests/test_train --gtest_filter='*Cuda*' > "$OUT/test_train_cuda.log" 2>&1
  echo "test_train cuda rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_train_cuda.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \]|Failure" "$OUT/test_train_cuda.log" | head -20
fi
if has bench; then
  timeout 240 ../build-gpu/vela bench engine --json "$OUT/engine_h200.json" > "$OUT/engine_h200.txt" 2>&1
  echo "bench engine rc=$?"; cat "$OUT/engine_h200.txt"
  timeout 60 ../build-gpu/tests/test_cuda --gtest_filter='*Sampling*Bench*' --gtest_also_run_disabled_tests \
    > "$OUT/sampling_bench.log" 2>&1; tail -25 "$OUT/sampling_bench.log"
fi
if has profile; then
  # Where a decode step's GPU time goes: per-kernel totals over a short batch-1 and batch-64 run.
  if command -v nsys >/dev/null; then
    for c in decode1k batch64; do
      timeout 200 nsys profile -t cuda -o "$OUT/prof_$c" --force-overwrite true \
        ../build-gpu/vela bench engine --preset bench-1b --cases $c --decode 64 > /dev/null 2>&1
      nsys stats -r cuda_gpu_kern_sum,cuda_api_sum --format csv "$OUT/prof_$c.nsys-rep" \
        > "$OUT/prof_$c.csv" 2>/dev/null
      rm -f "$OUT/prof_$c.nsys-rep" "$OUT/prof_$c.sqlite"
      echo "== $c"; head -25 "$OUT/prof_$c.csv" | cut -c1-200
    done
  elif command -v ncu >/dev/null; then
    # Eager (no graphs) so every kernel is its own launch; ~400 kernels = one decode step.
    timeout 300 ncu --csv --metrics gpu__time_duration.sum --launch-skip 4000 --launch-count 400 \
      ../build-gpu/vela bench engine --preset bench-1b --cases decode1k --decode 48 --no-graphs \
      > "$OUT/ncu_decode1k.csv" 2> "$OUT/ncu.err"
    python3 tools/ncu_summary.py "$OUT/ncu_decode1k.csv" "ncu decode step (about one step)" 14
  else
    echo "no nsys or ncu on this machine"
  fi
fi
