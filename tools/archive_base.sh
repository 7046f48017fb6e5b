#!/usr/bin/env bash
# Packs the sources of an older commit for a same-card A/B on the GPU machine (how session 46 found
# the batch-64 regression): `git archive REV` without the models, fixtures, docs and results, as
# .gpu-base/base.tar.xz (ignored by git; ~0.9 MB). Carry ".gpu-base" with the device call and run
# `tools/gpu_decode.sh build base` there: it builds vela from the archive into build-base and times
# `vela bench engine` alternating between the two builds (BASE_CASES, BASE_ROUNDS).
# usage: tools/archive_base.sh REV
set -euo pipefail
rev="${1:?usage: tools/archive_base.sh REV}"
root="$(git rev-parse --show-toplevel)"
sha="$(git -C "$root" rev-parse --verify "$rev^{commit}")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/base"
git -C "$root" archive "$sha" | tar -x -C "$tmp/base"
rm -rf "$tmp/base/models" "$tmp/base/tests/fixtures" "$tmp/base/docs" "$tmp/base/bench/results"
echo "$sha" > "$tmp/base/BASE_COMMIT"
mkdir -p "$root/.gpu-base"
tar -cJf "$root/.gpu-base/base.tar.xz.part" -C "$tmp" base
mv "$root/.gpu-base/base.tar.xz.part" "$root/.gpu-base/base.tar.xz"
echo "packed $sha into .gpu-base/base.tar.xz ($(du -h "$root/.gpu-base/base.tar.xz" | cut -f1))"
