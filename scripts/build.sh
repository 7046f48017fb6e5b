#!/usr/bin/env bash
# Configures and builds vela into ${VELA_BUILD_DIR:-build} with Ninja, in parallel.
# Extra arguments go to cmake (e.g. -DVELA_CUDA=OFF, -DVELA_CUDA_ARCHS=90).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${VELA_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
