#!/usr/bin/env bash
# Makes .deps-lite/deps.tar.xz on the CPU machine: the Debian libraries vela builds against that the
# GPU machine's image lacks (it has nvcc, CMake and ninja but no OpenBLAS, nlohmann-json,
# cpp-httplib, PCRE2, utf8proc, GoogleTest or Boost), unpacked and xz-compressed (about 9 MB, so
# the tree plus this stays under the device tool's 64 MiB carry). Static libraries are dropped
# except GoogleTest's and Google Benchmark's (Debian ships those only static). Boost is the subset
# of headers the server's Beast/Asio sources include (`g++ -M`), not the 10 MB -dev package.
# usage: tools/make_gpu_deps.sh   (then carry ".deps-lite" and `source tools/gpu_deps.sh` there)
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5
      nlohmann-json3-dev libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev libbrotli1
      libpcre2-dev libpcre2-8-0 libpcre2-posix3 libutf8proc-dev libutf8proc2 libgtest-dev
      libgmock-dev libbenchmark-dev libbenchmark1debian libssl-dev zlib1g-dev)
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debs" "$tmp/root"
(cd "$tmp/debs" && apt-get download "${PKGS[@]}" >/dev/null)
for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$tmp/root"; done
find "$tmp/root" -name "*.a" ! -name "libgtest*" ! -name "libgmock*" ! -name "libbenchmark*" -delete
rm -rf "$tmp/root/usr/share/doc" "$tmp/root/usr/share/man"
for s in src/server/*.cpp; do g++ -std=c++20 -M -Isrc "$s" 2>/dev/null || true; done |
  tr ' \\' '\n\n' | grep "^/usr/include/boost/" | sed 's#^/usr/include/##' | sort -u > "$tmp/boost.txt"
(cd /usr/include && tar -cf - -T "$tmp/boost.txt") | tar -xf - -C "$tmp/root/usr/include"
mkdir -p .deps-lite
tar -C "$tmp/root" -cf - . | xz -6 -T2 > .deps-lite/deps.tar.xz.part
mv .deps-lite/deps.tar.xz.part .deps-lite/deps.tar.xz
echo "[gpu-deps] .deps-lite/deps.tar.xz: $(du -h .deps-lite/deps.tar.xz | cut -f1), $(wc -l < "$tmp/boost.txt") Boost headers"
