#!/usr/bin/env bash
# The engine's concurrency tests under ThreadSanitizer: threads generating while another pushes
# weights and another reads stats (tests/engine/test_engine_updates.cpp), plus the engine's other
# threaded tests. Builds test_engine with -DVELA_SANITIZE=thread into ${VELA_TSAN_BUILD_DIR:-build-tsan}.
# OpenMP is kept to one thread (libgomp is not instrumented; its internals would be reported).
# Extra arguments go to the test binary (e.g. --gtest_filter=EngineUpdates.*).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${VELA_TSAN_BUILD_DIR:-build-tsan}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVELA_SANITIZE=thread \
  -DVELA_CUDA=OFF -DVELA_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target test_engine
cd tests
OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  "../$BUILD_DIR/tests/test_engine" --gtest_filter="${1:-EngineUpdates.*:Engine*Concurrent*:Engine*Cancel*}" \
  "${@:2}"
echo "[tsan] no data race reported"
