#!/usr/bin/env bash
# vela's main job on its built-in defaults. Today: build, then show what this machine and build can
# do (`vela info`) and measure the op library against the machine's peaks (`vela bench ops`).
# Later this serves and chats with the bundled model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh "$@"
BIN="${VELA_BUILD_DIR:-build}/vela"
"$BIN" info
echo
"$BIN" bench ops --quick
