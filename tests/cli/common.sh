# Shared set-up of the CLI tests (sourced, not run): the data every training test starts from.
#   make_text_corpus VELA DIR SEED N_LINES
#       DIR/text.txt and DIR/data.jsonl ({"text": ...}): N_LINES random sentences over a
#       16-word vocabulary (python's random.seed(SEED)); DIR/tok: a 300-token byte-level BPE
#       trained on them (<|endoftext|> special); DIR/prep.json and DIR/shards: the corpus
#       preprocessed into packed 64-token sequences.
#   make_rl_toy VELA DIR [SEED]
#       examples/make_rl_toy_data.py's task in DIR (tokenizer/, dpo.jsonl, grpo.jsonl,
#       base.jsonl) and its shards: DIR/dpo_shards, DIR/grpo_shards, DIR/base_shards (the prep
#       configs of examples/ with the tokenizer path replaced), DIR/{dpo,grpo,base}_prep.json.
# ROOT is the repository root.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

make_text_corpus() {
  local vela="$1" d="$2" seed="$3" n="$4"
  python3 - "$d" "$seed" "$n" <<'PY'
import json, random, sys
d, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(seed)
words = "the lord said unto moses and aaron go in peace light day night earth heaven water".split()
with open(f"{d}/text.txt", "w") as t, open(f"{d}/data.jsonl", "w") as j:
    for i in range(n):
        s = " ".join(random.choice(words) for _ in range(random.randint(8, 30))) + "."
        t.write(s + "\n")
        j.write(json.dumps({"text": s}) + "\n")
PY
  "$vela" tokenize train --vocab-size 300 --special "<|endoftext|>" "$d/text.txt" --out "$d/tok" >/dev/null 2>&1
  cat > "$d/prep.json" <<JSON
{"tokenizer": "$d/tok", "format": "text", "sections": [{"field": "text"}],
 "eos_token": "<|endoftext|>", "seq_len": 64, "packing": true}
JSON
  "$vela" preprocess --config "$d/prep.json" "$d/data.jsonl" -o "$d/shards" --quiet >/dev/null
}

make_rl_toy() {
  local vela="$1" d="$2" seed="${3:-5}" f prep
  python3 "$ROOT/examples/make_rl_toy_data.py" "$d" --seed "$seed" >/dev/null
  for f in dpo grpo base; do
    prep="$ROOT/examples/${f}_toy_prep.json"
    [ $f = base ] && prep="$ROOT/examples/rl_toy_base_prep.json"
    sed "s#build/rl_toy/tokenizer#$d/tokenizer#" "$prep" > "$d/${f}_prep.json"
    "$vela" preprocess --config "$d/${f}_prep.json" "$d/$f.jsonl" -o "$d/${f}_shards" --quiet >/dev/null
  done
}
