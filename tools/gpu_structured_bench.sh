#!/usr/bin/env bash
# Structured output on the H200 (issue 17 §1): the B = 64 decode step with every request under a
# JSON schema against the same step unconstrained (`vela bench engine --cases batch64,batch64_json`,
# bench-1b's shape with Qwen's 151,936-token vocabulary; floor: the mask adds <= 5%), and the
# host-side compile / first-mask costs (`vela bench constrain`) when the Qwen3 tokenizer is there
# (.cache/assets/tokenizers/qwen3, or a copy under .wt-structured/; without it the engine case masks
# a synthetic byte-level vocabulary of the same size). About 60 s after the build.
# usage (GPU machine, repository root): OUT=dir tools/gpu_structured_bench.sh
set -euo pipefail
OUT="${OUT:-/tmp/vela-gpu}"
mkdir -p "$OUT"
source tools/gpu_deps.sh
if [ ! -f build-gpu/CMakeCache.txt ]; then
  cmake -S . -B build-gpu -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release \
    -DVELA_MPI=OFF > "$OUT/structured_cfg.log" 2>&1
fi
ninja -C build-gpu -j16 vela > "$OUT/structured_build.log" 2>&1 || { tail -40 "$OUT/structured_build.log"; exit 1; }
TOK=""
for d in .cache/assets/tokenizers/qwen3 .wt-structured/.cache/assets/tokenizers/qwen3; do
  [ -f "$d/tokenizer.json" ] && { TOK="$d"; break; }
done
TOKARG=()
[ -n "$TOK" ] && TOKARG=(--tokenizer "$TOK")
timeout 150 ./build-gpu/vela bench engine --cases batch64,batch64_json --vocab-size 151936 \
  "${TOKARG[@]}" --json "$OUT/structured_engine.json" 2>&1 | tee "$OUT/structured_engine.txt"
if [ -n "$TOK" ]; then
  timeout 60 ./build-gpu/vela bench constrain --tokenizer "$TOK" --steps 48 2>&1 \
    | tee "$OUT/structured_constrain.txt" | tail -4
fi
