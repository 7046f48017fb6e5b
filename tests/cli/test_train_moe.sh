#!/usr/bin/env bash
# End-to-end mixture of experts on the CPU: `vela train` of a tiny Qwen3-MoE config (router
# losses on) lowers the loss and logs the router losses and per-layer expert loads in
# metrics.jsonl; the checkpoint is written in the Hub's per-expert layout; `vela generate` runs it
# through the engine.
# usage: test_train_moe.sh path/to/vela   (run from tests/)
set -euo pipefail
VELA="$1"
source "$(dirname "$0")/common.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

make_text_corpus "$VELA" "$dir" 5 150
cat > "$dir/moe.json" <<JSON
{"model_type": "qwen3_moe", "vocab_size": 300, "hidden_size": 48, "num_hidden_layers": 2,
 "intermediate_size": 64, "moe_intermediate_size": 32, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 12, "num_experts": 6, "num_experts_per_tok": 2,
 "norm_topk_prob": true, "router_aux_loss_coef": 0.01, "router_z_loss_coef": 0.001,
 "output_router_logits": true, "max_position_embeddings": 128, "rope_theta": 10000.0,
 "tie_word_embeddings": true}
JSON
cat > "$dir/train.json" <<JSON
{"out_dir": "$dir/run", "model": "$dir/moe.json", "seed": 1, "max_steps": 30, "log_every": 1,
 "save_every": 30, "eval_every": 0, "progress": false,
 "data": {"kind": "seq", "path": "$dir/shards", "batch_size": 4},
 "schedule": {"kind": "cosine", "lr": 0.01, "warmup_steps": 3}}
JSON
"$VELA" train --config "$dir/train.json" >/dev/null 2>"$dir/train.log" || { cat "$dir/train.log"; exit 1; }
python3 - "$dir/run" <<'PY'
import json, os, sys
run = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if "val_loss" not in l]
assert len(rows) == 30, len(rows)
first = sum(r["loss"] for r in rows[:5]) / 5
last = sum(r["loss"] for r in rows[-5:]) / 5
assert last < first - 0.5, (first, last)
for r in rows:
    assert r["router_aux_loss"] > 0 and r["router_z_loss"] > 0, r
    assert [l["layer"] for l in r["moe_layers"]] == [0, 1], r["moe_layers"]
    for l in r["moe_layers"]:
        assert len(l["load"]) == 6 and abs(sum(l["load"]) - 1) < 1e-9 and l["load_max"] >= 1, l
ck = os.path.join(run, "step-00000030")
cfg = json.load(open(os.path.join(ck, "config.json")))
assert cfg["model_type"] == "qwen3_moe" and cfg["num_experts"] == 6, cfg
hdr = open(os.path.join(ck, "model.safetensors"), "rb").read()
assert b"model.layers.1.mlp.experts.5.down_proj.weight" in hdr[:65536]
print(f"train moe: loss {first:.3f} -> {last:.3f}, aux {rows[-1]['router_aux_loss']:.3f}, "
      f"worst expert load {rows[-1]['moe_load_max']:.2f}")
PY
out=$("$VELA" generate --model "$dir/run/step-00000030" --prompt "the lord" --max-tokens 6 --temperature 0)
[ -n "$out" ] || { echo "generate printed nothing"; exit 1; }
echo "train moe: training, metrics, Hub-layout checkpoint and generation OK"
