#!/usr/bin/env bash
# Builds the demo model's data from public-domain English in Debian packages (licences:
# models/vela-demo/README.md), into WORK (default runs/demo, git-ignored):
#   corpus/    scripts/fetch_corpus.sh: World English Bible + King James Version (apt installs
#              sword-text-web and bible-kjv when missing)
#   debs/      dict-devil, dict-jargon, r-cran-janeaustenr: downloaded with `apt-get download`
#              and unpacked with `dpkg -x` (the text only; neither dictd nor R is installed)
#   data/      tools/demo_data.py: pretrain_{train,valid}.jsonl, sft_{train,valid}.jsonl, data.json
#   tokenizer/ `vela tokenize train` (8192 byte-level BPE tokens with <|endoftext|>, <|im_start|>,
#              <|im_end|>), then tools/demo_tokenizer.py (ChatML template, generation_config.json)
#   model_config.json   examples/demo/model.json with the special token ids
#   shards/    `vela preprocess`: pretrain_train, pretrain_valid, sft_train (the SFT mix: ChatML
#              prompts masked, answers and half the pretraining text trained)
#
#   scripts/demo_data.sh [WORK]        VELA_BIN=build/vela by default
#   VELA_DEMO_TOKENIZER=DIR            use DIR's tokenizer instead of training one (the
#                                      speculative pair of tools/gpu_spec_pair.sh uses vela-demo's)
set -euo pipefail
cd "$(dirname "$0")/.."
WORK="${1:-${VELA_DEMO_WORK:-runs/demo}}"
VELA="${VELA_BIN:-build/vela}"
[ -x "$VELA" ] || { echo "[demo-data] $VELA not found: build the vela target first" >&2; exit 1; }
mkdir -p "$WORK/debs"

scripts/fetch_corpus.sh "$WORK/corpus" > /dev/null 2> "$WORK/corpus.log" ||
  { cat "$WORK/corpus.log" >&2; exit 1; }

PKGS=(dict-devil dict-jargon r-cran-janeaustenr)
for p in "${PKGS[@]}"; do
  if ! ls "$WORK/debs/${p}"_*.deb > /dev/null 2>&1; then
    echo "[demo-data] apt-get download $p" >&2
    (cd "$WORK/debs" && apt-get download "$p" 2> /dev/null) ||
      { sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
        $sudo apt-get update -qq && (cd "$WORK/debs" && apt-get download "$p"); }
  fi
done
rm -rf "$WORK/debs/root"
for f in "$WORK"/debs/*.deb; do dpkg -x "$f" "$WORK/debs/root"; done
(cd "$WORK/debs" && sha256sum ./*.deb) > "$WORK/debs/SHA256SUMS"

python3 tools/demo_data.py --corpus "$WORK/corpus" --root "$WORK/debs/root" --out "$WORK/data"

if [ -n "${VELA_DEMO_TOKENIZER:-}" ]; then
  mkdir -p "$WORK/tokenizer"
  for f in tokenizer.json tokenizer_config.json special_tokens_map.json generation_config.json; do
    [ -f "$VELA_DEMO_TOKENIZER/$f" ] && cp "$VELA_DEMO_TOKENIZER/$f" "$WORK/tokenizer/"
  done
else
  "$VELA" tokenize train --vocab-size 8192 --special "<|endoftext|>,<|im_start|>,<|im_end|>" \
    "$WORK/data/tokenizer_train.txt" --out "$WORK/tokenizer" 2> "$WORK/tokenizer.log" ||
    { cat "$WORK/tokenizer.log" >&2; exit 1; }
fi
python3 tools/demo_tokenizer.py "$WORK/tokenizer" --model-config examples/demo/model.json "$WORK/model_config.json"

for s in train valid; do
  "$VELA" preprocess --config examples/demo/pretrain_prep.json --tokenizer "$WORK/tokenizer" --quiet \
    "$WORK/data/pretrain_$s.jsonl" -o "$WORK/shards/pretrain_$s"
done
"$VELA" preprocess --config examples/demo/sft_prep.json --tokenizer "$WORK/tokenizer" --quiet \
  "$WORK/data/sft_mix_train.jsonl" -o "$WORK/shards/sft_train"
echo "[demo-data] ready in $WORK" >&2
