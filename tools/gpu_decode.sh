#!/usr/bin/env bash
# The decode-kernel checks in one GPU call (issue 16 item 1): build vela + test_cuda for sm_90, run
# the CUDA tests of the ops and engine paths decode touches, the GEMV microbenchmark
# (DISABLED_FusedDecodeBench), `vela bench engine` with the fused path on / off, PDL off, the
# persistent GEMV off, the small-batch GEMV row cap and the LoRA serving cost, and an nsys kernel
# summary of decode at 1K context when nsys exists; and, not in the default, `patch` (the request
# table's patch against a copy per row), `minrows` (single-row steps overlapped or not,
# VELA_OVERLAP_MIN_ROWS), `stages` (decode attention's K/V tiles in flight, the wgmma GEMM's
# stages), `sampling` (the sampler's one-pass draw and radix
# selects or not), `qwen` (the Qwen3-1.7B shape's split count at B = 64), `splits` (split-KV
# decode at large batch with the keys in HBM, sweep and engine A/B; the argmax pre-pass's blocks
# per SM), `kernels` (ncu's per-kernel times of batch-64 decode graph nodes), `detail` (ncu's
# stall and memory sections of a few of them), `side` (the step's copies on side streams or not), `cluster` (split-K clusters of up to 16), `timeline` (one batch-64 step's graph nodes as the GPU
# runs them, nsys), `trace` (the same from CUPTI's records, tools/cupti_trace, where nsys is missing) and `base` (an older commit's vela, packed by
# tools/archive_base.sh, timed against this tree's on the same card), `warm` (single-row decode's
# L2 hint: how many MB of gate|up), `gemvsplit` (the one-row GEMV splits of session 61 against the old ones), `probe` (the wgmma GEMMs' phases in batch-64 / 16 steps, from
# a probe build), `trigger` (the layer GEMMs' dependents launched after their main loop or not, at every row count), `pipe` (the o / down / gate|up epilogues pipelined over their items or not), `stream` (`vela bench stream`: weights streamed by register loads, bulk copies or cp.async, and the persistent-kernel skeleton). Logs go to $OUT; the device
# tool brings back at most 8 files, so give the script OUT=/tmp/o and tar that folder into the
# tool's $OUT (a loop that tars every 20 s keeps what a cut-off call did).
# usage (on the GPU machine, from the repository root): OUT=dir tools/gpu_decode.sh [what...]
#   what: build tests micro bench ab profile stream patch minrows stages sampling qwen splits
#         kernels detail timeline trace base side cluster warm gemvsplit trigger pipe probe
#   (default: the first six; they run in this file's order, whatever the order given: put the
#   cheap ones in a call whose time may run out before the last)
set -uo pipefail
OUT="${OUT:-/tmp/vela-gpu}"
mkdir -p "$OUT"
WHAT="${*:-build tests micro bench ab profile}"
has() { [[ " $WHAT " == *" $1 "* ]]; }
source tools/gpu_deps.sh   # .deps-lite (tools/make_gpu_deps.sh) where the packages are missing
{ which ncu nsys; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv; } > "$OUT/tools.txt" 2>&1
if has build; then
  { cmake -S . -B build-gpu -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release &&
    ninja -C build-gpu -j16 vela test_cuda; } > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
  echo "build ok ($(date +%T))"
fi
B=$PWD/build-gpu
# ab_runs LABEL VAR "VALUES" CASES [ROUNDS]: `vela bench engine --cases CASES $BENCH_ARGS` with VAR
# at each value, in alternating rounds (default 2); logs in $OUT/LABEL_ROUND_VALUE.txt.
ab_runs() {
  local label=$1 var=$2 values=$3 cases=$4 rounds=${5:-2} round v f
  for round in $(seq "$rounds"); do
    for v in $values; do
      f="$OUT/${label}_${round}_$v.txt"
      env "$var=$v" timeout 90 "$B/vela" bench engine --cases "$cases" ${BENCH_ARGS:-} > "$f" 2>&1
      echo "bench engine $var=$v rc=$?"; grep -E "^(decode|batch)" "$f"
    done
  done
}
# env_tests LOG VAR=VALUE FILTER: test_cuda's FILTER with VAR=VALUE set, logged to $OUT/LOG.log.
env_tests() {
  [ -x "$B/tests/test_cuda" ] || return 0
  (cd tests && env "$2" timeout 120 "$B/tests/test_cuda" --gtest_filter="$3" > "$OUT/$1.log" 2>&1)
  echo "test_cuda ($2) rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/$1.log" | tr '\n' ' ')"
}
# The decode layer's fused wgmma GEMMs and the engines that run them.
LAYER_TESTS='CudaFusedDecodeTest.NormPiece*:CudaFusedDecodeTest.GemmRotary*:CudaFusedDecodeTest.FusedBatch*:CudaEngine*'
# splits_sweep NAME: the split-KV decode sweep (DISABLED_BenchDecodeSplits: every split count, each
# call on another cache copy) into $OUT/NAME.log.
splits_sweep() {
  (cd tests && timeout 300 "$B/tests/test_cuda" --gtest_also_run_disabled_tests \
    --gtest_filter='*BenchDecodeSplits*' > "$OUT/$1.log" 2>&1)
  echo "decode splits sweep rc=$?"; grep -E "^splits" "$OUT/$1.log"
}
if has tests; then
  (cd tests && timeout "${TEST_TIMEOUT:-240}" "$B/tests/test_cuda" \
    --gtest_filter="${TESTS:-CudaFusedDecode*:CudaGemm*:CudaAttention*:CudaEngine*:*NormRope*:*Rotary*:*Elementwise*:CudaSampl*}" \
    > "$OUT/test_cuda.log" 2>&1)
  echo "test_cuda rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_cuda.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \]|Failure|bf16 GPU vs" "$OUT/test_cuda.log" | head -30
fi
if has micro; then
  (cd tests && timeout 120 "$B/tests/test_cuda" --gtest_also_run_disabled_tests \
    --gtest_filter='*FusedDecodeBench*' > "$OUT/micro.log" 2>&1)
  grep -E "^B=" "$OUT/micro.log"
fi
if has bench; then
  timeout 150 "$B/vela" bench engine --json "$OUT/engine.json" > "$OUT/engine.txt" 2>&1
  echo "bench engine rc=$?"; cat "$OUT/engine.txt"
fi
if has ab; then
  i=0
  for v in "VELA_FUSED_DECODE=0" "VELA_PDL=0" "VELA_GEMV_PERSIST=0"; do
    env $v timeout 90 "$B/vela" bench engine --cases decode1k,decode8k,decode32k > "$OUT/engine_ab$((++i)).txt" 2>&1
    echo "bench engine $v rc=$?"; grep -E "^decode" "$OUT/engine_ab$i.txt"
  done
  # Small batches: the plain GEMMs of 3..8 rows on the GEMV (8) or cuBLASLt (the default, 2).
  for r in 8 2 8 2; do
    VELA_GEMV_MAX_ROWS=$r timeout 90 "$B/vela" bench engine --cases batch2,batch4,batch8 > "$OUT/engine_rows$r.txt" 2>&1
    echo "bench engine VELA_GEMV_MAX_ROWS=$r rc=$?"; grep -E "^batch" "$OUT/engine_rows$r.txt"
  done
  # LoRA serving cost: one and four rank-16 adapters on every linear module.
  for n in 1 4; do
    timeout 90 "$B/vela" bench engine --cases decode1k,batch8,batch64 --lora $n > "$OUT/engine_lora$n.txt" 2>&1
    echo "bench engine --lora $n rc=$?"; grep -E "^(decode|batch)" "$OUT/engine_lora$n.txt"
  done
fi
if has patch; then
  # The request table's patch (one upload + ops::write_ranges) against a copy per row.
  ab_runs patch VELA_TABLE_PATCH "0 1" batch64,batch16 "${PATCH_ROUNDS:-2}"
fi
if has stages; then
  # K/V tiles in flight per block of the tensor-core decode attention (0 = auto, the default), and the wgmma
  # GEMM's stages fitted to a split's chunks (VELA_WGMMA_FIT_STAGES, default on).
  ab_runs stages VELA_DECODE_MMA_STAGES "${STAGES:-0 4 2}" batch64,batch32,decode1k,decode8k,decode32k
  ab_runs fit VELA_WGMMA_FIT_STAGES "1 0" batch64,batch32,batch16,batch4
fi
if has qwen; then
  # The Qwen3-1.7B shape (16q / 8kv / d128: the row kernel) with the row kernel's cover threshold
  # at 3 x the SMs (12 quarters, the default) against the tensor-core kernel's 3/4 (3).
  BENCH_ARGS="--config bench/configs/qwen3_1p7b.json" \
    ab_runs qwen VELA_DECODE_SPLIT_COVER_ROWS "12 3" batch16,batch32,batch64
fi
if has sampling; then
  # The sampler's kernel time per configuration (DISABLED_Bench, B = 1 / 64, vocab 100k / 152k):
  # the plain walks with the bisection, the one-pass draw + unrolled compaction (VELA_SAMPLE_FAST,
  # the default since session 45), the exact path's radix selects (VELA_SAMPLE_RADIX), both.
  # SAMPLING_RUNS: the (fast, radix) pairs, as digit pairs (default "00 10 01 11").
  for v in ${SAMPLING_RUNS:-00 10 01 11}; do
    f=${v:0:1} r=${v:1:1}
    (cd tests && VELA_SAMPLE_FAST=$f VELA_SAMPLE_RADIX=$r timeout 240 "$B/tests/test_cuda" \
      --gtest_also_run_disabled_tests --gtest_filter='CudaSamplingTest.DISABLED_Bench' \
      > "$OUT/sampling_fast${f}_radix$r.log" 2>&1)
    echo "sampling bench VELA_SAMPLE_FAST=$f VELA_SAMPLE_RADIX=$r rc=$?"
    grep -E "^[0-9]+ " "$OUT/sampling_fast${f}_radix$r.log"
  done
fi
if has stream; then
  # How fast one kernel streams read-once weights by each loading method (register loads, bulk
  # copies into a shared-memory ring with its refill policies, cp.async): `vela bench stream`.
  timeout 120 "$B/vela" bench stream --json "$OUT/stream.json" > "$OUT/stream.txt" 2>&1
  echo "bench stream rc=$?"; cat "$OUT/stream.txt"
fi
if has warm; then
  # Single-row decode's L2 hint (ops/l2_warm.h): the split merge prefetches the leading
  # VELA_DECODE_L2_WARM_MB of the layer's gate|up weight (0 = off; default 16).
  ab_runs warm VELA_DECODE_L2_WARM_MB "${WARM_MB:-0 8 16 32}" "${WARM_CASES:-decode1k,decode8k,decode32k}" "${WARM_ROUNDS:-2}"
fi
if has gemvsplit; then
  # The one-row GEMV splits (session 61, measured on H100s): gate|up behind the RMSNorm at W = 2
  # (1 before) and down's residual add at W = 8 (2 before), each against its old value.
  ab_runs gemvsplit_gu VELA_GEMV_NORM_WIDE_PARTS "2 1" "${SPLIT_CASES:-decode1k,decode8k,decode32k}" "${SPLIT_ROUNDS:-2}"
  ab_runs gemvsplit_dn VELA_GEMV_ADD_LONG_PARTS "8 2" "${SPLIT_CASES:-decode1k,decode8k,decode32k}" "${SPLIT_ROUNDS:-2}"
fi
if has trigger; then
  # The decode layer's wgmma GEMMs triggering their dependents after the main loop at every row
  # count (VELA_WGMMA_LATE_TRIGGER=1) or right after their wait at every row count (0); the default
  # is late from VELA_WGMMA_LATE_TRIGGER_ROWS (64) rows on. Both forced forms' results first (the
  # same bits either way: only the launch moves).
  for v in 1 0; do env_tests "test_trigger$v" "VELA_WGMMA_LATE_TRIGGER=$v" "$LAYER_TESTS"; done
  ab_runs trigger VELA_WGMMA_LATE_TRIGGER "0 1" "${TRIGGER_CASES:-batch64,batch32,batch16,batch4}" "${TRIGGER_ROUNDS:-3}"
fi
if has pipe; then
  # The o / down / gate|up epilogues pipelined over their items (VELA_WGMMA_PIPE_ITEMS=1: an item's
  # cluster loads before the previous item's stores; the same bits) or not (0, the default):
  # the pipelined form's results first, then the A/B.
  env_tests test_pipe VELA_WGMMA_PIPE_ITEMS=1 "$LAYER_TESTS:CudaFusedDecodeTest.Pipelined*:CudaGemm*"
  ab_runs pipe VELA_WGMMA_PIPE_ITEMS "0 1" "${PIPE_CASES:-batch64,batch32,batch16,batch4}" "${PIPE_ROUNDS:-3}"
fi
if has probe; then
  # The wgmma GEMMs' phases in batch-64 / 16 steps (ops/cuda/phase_probe.h): a probe build
  # (-DVELA_PHASE_PROBE=ON, its marks compiled out of every other build) run with
  # VELA_PHASE_PROBE=1 prints the mean cycles per block from each kernel's entry to its wait's
  # release, the first chunk landed, the main loop, the cluster reduction and the epilogue.
  { cmake -S . -B build-probe -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release \
      -DVELA_BUILD_TESTS=OFF -DVELA_PHASE_PROBE=ON && ninja -C build-probe -j16 vela; } \
    > "$OUT/build_probe.log" 2>&1 || { tail -20 "$OUT/build_probe.log"; exit 1; }
  for c in ${PROBE_CASES:-batch64 batch16}; do
    VELA_PHASE_PROBE=1 timeout 90 build-probe/vela bench engine --cases "$c" > "$OUT/probe_$c.txt" 2>&1
    echo "probe $c rc=$?"; grep -E "^(decode|batch)|phase probe|wgmma|->" "$OUT/probe_$c.txt"
  done
fi
if has base; then
  # The same card, two builds: vela from .gpu-base/base.tar.xz (tools/archive_base.sh REV) against
  # this tree's, `vela bench engine --cases BASE_CASES` alternating for BASE_ROUNDS rounds.
  if [ -f .gpu-base/base.tar.xz ]; then
    rm -rf /tmp/vela-base && mkdir -p /tmp/vela-base && tar -xJf .gpu-base/base.tar.xz -C /tmp/vela-base
    { cmake -S /tmp/vela-base/base -B build-base -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 \
        -DCMAKE_BUILD_TYPE=Release -DVELA_BUILD_TESTS=OFF && ninja -C build-base -j16 vela; } \
      > "$OUT/build_base.log" 2>&1 || { tail -20 "$OUT/build_base.log"; exit 1; }
    echo "base $(cat /tmp/vela-base/base/BASE_COMMIT) built ($(date +%T))"
    for round in $(seq "${BASE_ROUNDS:-3}"); do
      for b in base gpu; do
        f="$OUT/base_${round}_$b.txt"
        timeout 90 "$PWD/build-$b/vela" bench engine --cases "${BASE_CASES:-batch64,batch32,decode1k}" \
          ${BENCH_ARGS:-} > "$f" 2>&1
        echo "$b: $(grep -E '^(decode|batch)' "$f" | awk '{print $1, $4, $5}' | tr '\n' ' ')"
      done
    done
  else
    echo "base: no .gpu-base/base.tar.xz (tools/archive_base.sh REV, and carry .gpu-base)"
  fi
fi
if has splits; then
  # Split-KV decode at large batch with the keys in HBM: the sweep (each call on another cache copy,
  # KvCopies) and the engine with VELA_DECODE_SPLIT_FULL_KEYS (1024 = the policy, one split up to
  # 1024 keys; 256 / 128: 2-3 / 4-5 splits at 512-640 keys); then the sampler's argmax pre-pass
  # at 2 (the default) and 8 blocks per SM.
  splits_sweep splits_micro
  ab_runs splits VELA_DECODE_SPLIT_FULL_KEYS "1024 256 128" batch64,batch32
  ab_runs argmax VELA_ARGMAX_BLOCKS_PER_SM "2 8" batch64,batch16
fi
if has kernels && command -v ncu > /dev/null; then
  # Per-kernel GPU time of batch-64 decode steps as the graphs run them (each node serialised by
  # ncu, caches and clocks left alone): which kernels hold the forward's time in situ.
  timeout "${NCU_TIMEOUT:-300}" ncu --csv --metrics gpu__time_duration.sum --graph-profiling node --cache-control none \
    --clock-control none --launch-skip "${NCU_SKIP:-8000}" --launch-count 400 \
    "$B/vela" bench engine --cases batch64 --decode 256 > "$OUT/ncu_batch64.csv" 2> "$OUT/ncu_batch64.err"
  echo "ncu batch64 rc=$?"
  python3 tools/ncu_summary.py "$OUT/ncu_batch64.csv" "ncu batch64 (400 kernels, graph nodes)" 20 \
    --step "wgmma.*float"
fi
if has detail && command -v ncu > /dev/null; then
  # Why the small kernels take their time in situ: ncu's detailed sections (speed of light,
  # launch, occupancy, warp stalls, memory) for a few batch-64 GEMM / attention nodes and a few
  # batch-1 GEMV / attention nodes, each replayed alone with caches and clocks left alone.
  ncu_detail() {  # ncu_detail NAME CASE KERNEL_REGEX SKIP COUNT
    timeout "${NCU_TIMEOUT:-200}" ncu --graph-profiling node --cache-control none --clock-control none \
      --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section SchedulerStats -k "regex:$3" --launch-skip "$4" \
      --launch-count "$5" "$B/vela" bench engine --cases "$2" --decode 64 > "$OUT/ncu_$1.txt" 2>&1
    echo "ncu $1 rc=$?"
  }
  ncu_detail batch64 batch64 "wgmma_tma_gemm|decode_mma" 600 10
  ncu_detail decode1k decode1k "gemv|decode_mma|merge_splits" 1200 12
fi
if has timeline && command -v nsys > /dev/null; then
  # One batch-64 decode step as the GPU runs it (graph nodes, overlaps under programmatic dependent
  # launch included): tools/nsys_decode_step.py on an nsys trace of `vela bench engine`.
  for c in ${TIMELINE_CASES:-batch64}; do
    timeout 150 nsys profile -t cuda --cuda-graph-trace=node --force-overwrite true -o "$OUT/tl_$c" \
      "$B/vela" bench engine --cases "$c" --decode 128 > "$OUT/tl_${c}_run.log" 2>&1
    echo "nsys $c rc=$?"
    nsys export --type sqlite --force-overwrite true -o "$OUT/tl_$c.sqlite" "$OUT/tl_$c.nsys-rep" > /dev/null 2>&1
    python3 tools/nsys_decode_step.py "$OUT/tl_$c.sqlite" 64 > "$OUT/timeline_$c.txt" 2>&1
    head -60 "$OUT/timeline_$c.txt"
    rm -f "$OUT/tl_$c.sqlite" "$OUT/tl_$c.nsys-rep"
  done
fi
if has trace; then
  # The same with CUPTI's kernel records (tools/cupti_trace), for machines without nsys.
  CUPTI_H=$(find /usr/local/cuda/ /usr/local/cuda/extras -name cupti.h 2>/dev/null | head -1)
  if [ -n "$CUPTI_H" ]; then
    CUPTI_INC=$(dirname "$CUPTI_H")
    CUPTI_LIB=$(dirname "$(find /usr/local/cuda/ -name 'libcupti.so*' 2>/dev/null | head -1)")
    g++ -O2 -shared -fPIC -I"$CUPTI_INC" -I/usr/local/cuda/include tools/cupti_trace/kernel_trace.cpp \
      -L"$CUPTI_LIB" -Wl,-rpath,"$CUPTI_LIB" -lcupti -o "$B/libkernel_trace.so" > "$OUT/trace_build.log" 2>&1
    echo "kernel_trace build rc=$?"
    # TRACE_ENVS: one run per entry, "-" for the defaults, else VAR=VALUE[,VAR=VALUE].
    for c in ${TIMELINE_CASES:-batch64}; do
      for e in ${TRACE_ENVS:--}; do
        n="${c}_${e//[=,]/_}"
        env $( [ "$e" = - ] || echo "${e//,/ }" ) CUDA_INJECTION64_PATH="$B/libkernel_trace.so" \
          VELA_KERNEL_TRACE="$OUT/trace_$n.csv" \
          timeout 150 "$B/vela" bench engine --cases "$c" --decode 128 > "$OUT/trace_${n}_run.log" 2>&1
        echo "trace $c $e rc=$?"; grep -E "^(decode|batch)" "$OUT/trace_${n}_run.log"
        python3 tools/kernel_trace_step.py "$OUT/trace_$n.csv" 64 > "$OUT/trace_$n.txt" 2>&1
        head -14 "$OUT/trace_$n.txt"
        xz -f "$OUT/trace_$n.csv"
      done
    done
  else
    echo "no cupti.h under /usr/local/cuda"
  fi
fi
if has cluster; then
  # Split-K clusters past the portable 8 (VELA_WGMMA_MAX_CLUSTER): the GEMM tests, then A/B.
  (cd tests && VELA_WGMMA_MAX_CLUSTER=16 timeout 200 "$B/tests/test_cuda" \
    --gtest_filter='CudaGemm*:CudaFusedDecode*:CudaEngine.*' > "$OUT/test_cluster16.log" 2>&1)
  echo "test_cuda (clusters of up to 16) rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_cluster16.log" | tr '\n' ' ')"
  ab_runs cluster VELA_WGMMA_MAX_CLUSTER "8 16" "${CLUSTER_CASES:-batch64,batch32,batch16}" 3
fi
if has side; then
  # The step's uploads and read-back on side streams or on the engine stream (VELA_SIDE_COPIES).
  ab_runs side VELA_SIDE_COPIES "1 0" "${SIDE_CASES:-batch64,batch16,decode1k}" "${SIDE_ROUNDS:-3}"
fi
if has minrows; then
  # Single-row steps overlapped or not (VELA_OVERLAP_MIN_ROWS).
  ab_runs minrows VELA_OVERLAP_MIN_ROWS "2 1" decode1k,decode8k
fi
if has profile && command -v nsys > /dev/null; then
  timeout 120 nsys profile --cuda-graph-trace=node --force-overwrite true -o "$OUT/decode1k" \
    "$B/vela" bench engine --cases decode1k --decode 64 > "$OUT/nsys_run.log" 2>&1
  echo "nsys rc=$?"
  nsys stats --report cuda_gpu_kern_sum --format csv -o "$OUT/decode1k" "$OUT/decode1k.nsys-rep" > /dev/null 2>&1
  python3 - "$OUT"/decode1k_cuda_gpu_kern_sum.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
tot = sum(float(r["Total Time (ns)"]) for r in rows)
print(f"nsys kernels: {tot/1e6:.2f} ms total")
for r in rows[:25]:
    print(f'{float(r["Total Time (ns)"])/1e6:8.2f} ms {int(r["Instances"]):7d} x {float(r["Avg (ns)"])/1e3:8.2f} us  {r["Name"][:110]}')
PY
  rm -f "$OUT/decode1k.sqlite" "$OUT/decode1k.nsys-rep"
fi
