#!/usr/bin/env bash
# The test command: install dependencies, configure, build and run every test (CUDA tests skip
# without a GPU). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/fetch_assets.sh >/dev/null   # real tokenizers + HF oracles for the parity tests
scripts/build.sh -DVELA_BUILD_TESTS=ON "$@"   # ON: a build dir run.sh configured has it OFF
cd "${VELA_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 600
