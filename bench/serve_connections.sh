#!/usr/bin/env bash
# The connection checks of issue 16 item 7 against a real `vela serve` process on the CPU fixture
# model (qwen3_qknorm, 128-token character tokenizer), driven by `vela bench serve`:
#   0./1. a normal request's latency without, then with 2,000 slow connections (half a request
#      each) open;
#   2. 1,000 concurrent SSE streams (closed loop, 1,000 requests) with 2,000 slow connections
#      still open: errors, throughput, and the server's RSS / thread count during and after.
# usage: bench/serve_connections.sh path/to/vela [OUT_DIR]   (run from the repository root)
set -euo pipefail
VELA="$1" OUT="${2:-/tmp/vela-serve-connections}"
mkdir -p "$OUT"
W=$(mktemp -d)
M="$W/model"
mkdir -p "$M"
cp tests/fixtures/models/qwen3_qknorm/config.json tests/fixtures/models/qwen3_qknorm/model.safetensors "$M"/
python3 - "$M" <<'PY'
import json, sys
d = sys.argv[1]
vocab = {(chr(32 + i) if i < 95 else chr(ord('A') + (i - 95) % 26) + str(i)): i for i in range(128)}
json.dump({"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
           "post_processor": None, "decoder": {"type": "Fuse"},
           "model": {"type": "BPE", "vocab": vocab, "merges": []}}, open(f"{d}/tokenizer.json", "w"))
PY
ulimit -n "$(ulimit -Hn)"
"$VELA" serve --model "$M" --port 0 --max-batch 256 --max-queue 2048 --served-model-name fixture \
  2>"$W/serve.log" &
PID=$!
trap 'kill -9 $PID 2>/dev/null; wait $PID 2>/dev/null || true; rm -rf "$W"' EXIT
PORT=""
for _ in $(seq 1 150); do
  PORT=$(sed -n 's|.* on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$W/serve.log" | head -n 1)
  [ -n "$PORT" ] && break
  sleep 0.2
done
[ -n "$PORT" ] || { cat "$W/serve.log"; exit 1; }
URL="http://127.0.0.1:$PORT"
proc() { awk -v k="$1" '$1 == k":" {print $2}' /proc/$PID/status; }
echo "server pid $PID: RSS $(proc VmRSS) kB, $(proc Threads) threads at start"

echo "== 0. baseline: one stream at a time, 50 requests, no slow connections"
"$VELA" bench serve --url "$URL" --concurrency 1 --num-requests 50 --prompt-words 2:4 \
  --output-tokens 4 --out "$OUT/slow_0.json"
echo "== 1. the same while 2,000 slow connections are open"
"$VELA" bench serve --url "$URL" --concurrency 1 --num-requests 50 --prompt-words 2:4 \
  --output-tokens 4 --slow-connections 2000 --out "$OUT/slow_2000.json" &
B=$!
peak_fd=0 peak_rss=0 peak_thr=0
while kill -0 $B 2>/dev/null; do
  f=$(ls /proc/$PID/fd | wc -l) r=$(proc VmRSS) t=$(proc Threads)
  [ "$f" -gt "$peak_fd" ] && peak_fd=$f
  [ "$r" -gt "$peak_rss" ] && peak_rss=$r
  [ "$t" -gt "$peak_thr" ] && peak_thr=$t
  sleep 0.05
done
wait $B
echo "   server peak during the run: $peak_fd descriptors, RSS $peak_rss kB, $peak_thr threads"

echo "== 2. 1,000 concurrent SSE streams (1,000 requests x 16 tokens) plus 2,000 slow connections"
"$VELA" bench serve --url "$URL" --concurrency 1000 --num-requests 1000 --prompt-words 2:4 \
  --output-tokens 16 --slow-connections 2000 --out "$OUT/sse_1000.json" &
B=$!
peak_rss=0 peak_thr=0
while kill -0 $B 2>/dev/null; do
  r=$(proc VmRSS) t=$(proc Threads)
  [ "$r" -gt "$peak_rss" ] && peak_rss=$r
  [ "$t" -gt "$peak_thr" ] && peak_thr=$t
  sleep 0.1
done
wait $B
echo "   server peak during the run: RSS $peak_rss kB, $peak_thr threads; after: RSS $(proc VmRSS) kB, HWM $(proc VmHWM) kB"
python3 - "$OUT" "$peak_rss" "$peak_thr" <<'PY'
import json, sys
out, rss, thr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
j = json.load(open(f"{out}/sse_1000.json")); j["server_peak_rss_kib"] = rss; j["server_peak_threads"] = thr
json.dump(j, open(f"{out}/sse_1000.json", "w"), indent=1)
PY
