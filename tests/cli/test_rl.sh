#!/usr/bin/env bash
# End-to-end RL through the CLI on the toy task of examples/make_rl_toy_data.py (a 24-token
# tokenizer, a 2-layer model): DPO reaches pref_acc >= 0.9 and GRPO raises reward_mean from its
# starting level to >= 0.9, each from two seeds other than the examples' own; DPO resumes exactly;
# bad input is a clear error (a preference record without "rejected", G = 1, a reward endpoint
# that is not there, a reference with another vocabulary).
# usage: test_rl.sh path/to/vela   (run from tests/)
set -euo pipefail
VELA="$1"
source "$(dirname "$0")/common.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
make_rl_toy "$VELA" "$dir" 5
common=(--model "$ROOT/examples/rl_toy_model.json" --tokenizer "$dir/tokenizer" --no-progress)

best() {  # best value of metric $2 in metrics file $1, and its first value
  python3 - "$1" "$2" <<'PY'
import json, sys
v = [json.loads(l)[sys.argv[2]] for l in open(sys.argv[1]) if sys.argv[2] in json.loads(l)]
print(f"{v[0]:.4f} {max(v):.4f} {len(v)}")
PY
}

# Two seeds per objective, neither the examples' own (examples/rl_seed_sweep.sh runs 0..7).
for seed in 3 6; do
  "$VELA" train --config "$ROOT/examples/dpo_toy.json" "${common[@]}" --seed $seed --data.seed $seed \
    --data.path "$dir/dpo_shards" --out-dir "$dir/dpo$seed" >/dev/null 2>&1
  read first top n <<<"$(best "$dir/dpo$seed/metrics.jsonl" pref_acc)"
  echo "dpo seed $seed: pref_acc first $first, best $top over $n logged steps"
  python3 -c "import sys; sys.exit(0 if $top >= 0.9 else 1)" || { echo "DPO did not learn"; exit 1; }

  "$VELA" train --config "$ROOT/examples/grpo_toy.json" "${common[@]}" --seed $seed --data.seed $seed \
    --data.path "$dir/grpo_shards" --out-dir "$dir/grpo$seed" >/dev/null 2>&1
  read first top n <<<"$(best "$dir/grpo$seed/metrics.jsonl" reward_mean)"
  echo "grpo seed $seed: reward_mean first $first, best $top over $n logged steps"
  python3 -c "import sys; sys.exit(0 if $top >= 0.9 and $first < 0.5 else 1)" ||
    { echo "GRPO did not learn"; exit 1; }
  grep -q '"n_stale":0' "$dir/grpo$seed/metrics.jsonl"
done

# Exact resume of DPO: 6 steps straight == 3 steps, then --resume to 6.
dpo6=("${common[@]}" --data.path "$dir/dpo_shards" --log-every 1 --save-every 3)
"$VELA" train --config "$ROOT/examples/dpo_toy.json" "${dpo6[@]}" --max-steps 6 --out-dir "$dir/r1" >/dev/null 2>&1
"$VELA" train --config "$ROOT/examples/dpo_toy.json" "${dpo6[@]}" --max-steps 3 --out-dir "$dir/r2" >/dev/null 2>&1
"$VELA" train --config "$ROOT/examples/dpo_toy.json" "${dpo6[@]}" --max-steps 6 --out-dir "$dir/r2" --resume >/dev/null 2>&1
a=$(grep '"step":6,' "$dir/r1/metrics.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(d['loss'], d['pref_acc'])")
b=$(grep '"step":6,' "$dir/r2/metrics.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(d['loss'], d['pref_acc'])")
[ "$a" = "$b" ] || { echo "DPO resume differs: $a vs $b"; exit 1; }

# GRPO: rollouts held across a checkpoint (rollout_interval 2) resume exactly; samples older than
# max_staleness are counted and dropped.
g=("${common[@]}" --data.path "$dir/grpo_shards" --log-every 1 --save-every 3 --batch-size 4
   --grpo.rollout-interval 2)
"$VELA" train --config "$ROOT/examples/grpo_toy.json" "${g[@]}" --max-steps 4 --out-dir "$dir/q1" >/dev/null 2>&1
"$VELA" train --config "$ROOT/examples/grpo_toy.json" "${g[@]}" --max-steps 3 --out-dir "$dir/q2" >/dev/null 2>&1
"$VELA" train --config "$ROOT/examples/grpo_toy.json" "${g[@]}" --max-steps 4 --out-dir "$dir/q2" --resume >/dev/null 2>&1
pick='import json,sys; d=json.loads(sys.stdin.read()); print(d["loss"], d["reward_mean"], d["grad_norm"], d["rollout_fresh"])'
a=$(grep '"step":4,' "$dir/q1/metrics.jsonl" | python3 -c "$pick")
b=$(grep '"step":4,' "$dir/q2/metrics.jsonl" | python3 -c "$pick")
[ "$a" = "$b" ] || { echo "GRPO resume differs: $a vs $b"; exit 1; }
grep '"step":2,' "$dir/q1/metrics.jsonl" | grep -q '"rollout_fresh":false' || { echo "step 2 did not reuse the rollout"; exit 1; }
"$VELA" train --config "$ROOT/examples/grpo_toy.json" "${g[@]}" --max-steps 2 --grpo.max-staleness 0 \
  --out-dir "$dir/st" >/dev/null 2>&1
grep '"step":2,' "$dir/st/metrics.jsonl" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
assert d["n_stale"] == d["n_samples"] > 0 and d["target_tokens"] == 0, d' || { echo "stale samples were trained"; exit 1; }

# Bad input: each a clear error.
set +e
echo '{"prompt": "1", "chosen": "2"}' > "$dir/bad.jsonl"
err=$("$VELA" preprocess --config "$dir/dpo_prep.json" "$dir/bad.jsonl" -o "$dir/bad_shards" --quiet 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "rejected" <<<"$err" || { echo "missing rejected: rc=$rc $err"; exit 1; }
err=$("$VELA" train --config "$ROOT/examples/grpo_toy.json" "${common[@]}" --data.path "$dir/grpo_shards" \
  --out-dir "$dir/g1" --grpo.group-size 1 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "group_size" <<<"$err" || { echo "G = 1: rc=$rc $err"; exit 1; }
cat > "$dir/http.json" <<JSON
{"strategy": "grpo", "out_dir": "$dir/gh", "max_steps": 1, "progress": false,
 "data": {"path": "$dir/grpo_shards", "batch_size": 2},
 "grpo": {"group_size": 2, "max_tokens": 1, "reward": {"type": "http", "url": "http://127.0.0.1:9/score", "timeout_s": 2}}}
JSON
err=$("$VELA" train --config "$dir/http.json" "${common[@]}" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "reward endpoint" <<<"$err" || { echo "http reward: rc=$rc $err"; exit 1; }
sed 's/"vocab_size": 32/"vocab_size": 40/' "$ROOT/examples/rl_toy_model.json" > "$dir/big_model.json"
"$VELA" train --config "$ROOT/examples/dpo_toy.json" "${common[@]}" --model "$dir/big_model.json" \
  --data.path "$dir/dpo_shards" --max-steps 1 --out-dir "$dir/bigrun" >/dev/null 2>&1
err=$("$VELA" train --config "$ROOT/examples/dpo_toy.json" "${common[@]}" --data.path "$dir/dpo_shards" \
  --out-dir "$dir/vm" --max-steps 1 --dpo.reference "$dir/bigrun/step-00000001" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "vocabulary" <<<"$err" || { echo "vocab mismatch: rc=$rc $err"; exit 1; }
set -e
echo "test_rl: ok"
