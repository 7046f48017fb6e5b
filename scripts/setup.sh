#!/usr/bin/env bash
# Installs the Debian packages vela builds against (idempotent: installs only what is missing).
# Works as root, or through sudo otherwise. The CUDA toolkit is optional and not installed here.
#   scripts/setup.sh          everything the test suite needs
#   scripts/setup.sh --main   only what building and serving the `vela` binary needs (scripts/run.sh)
set -euo pipefail

# The `vela` binary (python3 and curl: scripts/run.sh's first exchange with the server; Boost for
# the server's HTTP layer, Beast + Asio, header-only; cpp-httplib for HTTP clients).
PACKAGES=(build-essential cmake ninja-build pkg-config libopenblas-dev nlohmann-json3-dev
          libcpp-httplib-dev libboost1.81-dev libpcre2-dev libutf8proc-dev python3 curl)
NEED_NODE=0
if [ "${1:-}" != "--main" ]; then
  PACKAGES+=(libgtest-dev libgmock-dev libbenchmark-dev python3-jinja2)
  # Data-parallel tests run 2 CPU ranks under mpirun (tests/dist/test_dist_train.sh). The vela
  # binary's MPI support is optional (CMake VELA_MPI=AUTO, found through find_package(MPI)).
  PACKAGES+=(libopenmpi-dev openmpi-bin)
  # The server's web-chat page is tested in headless Chromium (tests/server/run_e2e.sh web_ui).
  PACKAGES+=(chromium)
  # Oracle tests compare against Hugging Face packages from npm (scripts/fetch_assets.sh) and, for
  # chat templates, Python Jinja2 (python3-jinja2).
  command -v node >/dev/null && command -v npm >/dev/null || NEED_NODE=1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ "$NEED_NODE" -eq 1 ] && missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "[setup] all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "[setup] need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "[setup] installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
