#!/usr/bin/env bash
# Tokenizer encode throughput, vela vs Hugging Face `tokenizers`, single thread, same run, same
# 10 MB of English: KJV Bible + Jargon File + Devil's Dictionary when those Debian packages are
# installed (bible-kjv, dict-jargon, dict-devil), else generated English-like text. Both encode
# line by line and in ~64 KB pieces; MB/s by wall time and by CPU time (CPU time is the fair one
# on a busy machine).
#   bench/tokenizer_bench.sh [BUILD_DIR] [TOKENIZER_NAME...]   (default: build; qwen3 llama3_1 gpt4o)
# Prints a table and writes bench/results/tokenizer_bench.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-${VELA_BUILD_DIR:-build}}"; shift || true
NAMES=("$@"); [ ${#NAMES[@]} -gt 0 ] || NAMES=(qwen3 llama3_1 gpt4o)
ASSETS="${VELA_ASSETS:-.cache/assets}"
[ -d "$ASSETS/node_modules/tokenizers" ] || { echo "assets missing: run scripts/fetch_assets.sh" >&2; exit 1; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
CORPUS="$TMP/english.txt"
if command -v bible >/dev/null 2>&1; then
  bible -f -l100000 gen1:1-rev22:21 > "$CORPUS" 2>/dev/null || true
  for d in /usr/share/dictd/jargon.dict.dz /usr/share/dictd/devil.dict.dz; do
    [ -f "$d" ] && zcat "$d" >> "$CORPUS"
  done
fi
if [ ! -s "$CORPUS" ]; then
  node tests/tokenizer/oracle/gen_strings.js 120000 |
    node -e 'const l=require("fs").readFileSync(0,"utf8").split("\n").filter(Boolean).map(JSON.parse);process.stdout.write(l.join("\n"))' > "$CORPUS"
fi
python3 - "$CORPUS" <<'PY'
import sys
p = sys.argv[1]; t = open(p, encoding="utf-8", errors="replace").read()
while len(t.encode()) < 10_000_000: t += t
b = t.encode()[:10_000_000]; b = b[: b.rfind(b"\n") + 1]
open(p, "wb").write(b)
PY
mkdir -p bench/results
OUT=bench/results/tokenizer_bench.jsonl; : > "$OUT"
echo "| tokenizer | mode | vela MB/s (cpu) | HF MB/s (cpu) | ratio (cpu) | vela MB/s (wall) | HF MB/s (wall) |"
echo "|---|---|---|---|---|---|---|"
for n in "${NAMES[@]}"; do
  tok="$ASSETS/tokenizers/$n/tokenizer.json"
  OMP_NUM_THREADS=1 "$BUILD/vela" tokenize bench --tokenizer "$tok" "$CORPUS" > "$TMP/v"
  RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false NODE_PATH="$ASSETS/node_modules" \
    node bench/tokenizer_bench_hf.js "$tok" "$CORPUS" > "$TMP/h"
  python3 - "$n" "$TMP/v" "$TMP/h" "$OUT" <<'PY'
import json, sys
name, vp, hp, out = sys.argv[1:]
v = [json.loads(l) for l in open(vp)]; h = [json.loads(l) for l in open(hp)]
with open(out, "a") as f:
    for a, b in zip(v, h):
        a["tokenizer"] = b["tokenizer"] = name
        f.write(json.dumps(a) + "\n" + json.dumps(b) + "\n")
        print(f"| {name} | {a['mode']} | {a['mb_per_s_cpu']} | {b['mb_per_s_cpu']} | "
              f"{a['mb_per_s_cpu'] / b['mb_per_s_cpu']:.2f}x | {a['mb_per_s_wall']} | {b['mb_per_s_wall']} |")
PY
done
