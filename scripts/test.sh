#!/usr/bin/env bash
# The test command: install dependencies, configure, build and run every test (CUDA tests skip
# without a GPU). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh "$@"
cd "${VELA_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 600
