#!/usr/bin/env bash
# Runs the toy DPO and GRPO examples (examples/dpo_toy.json, examples/grpo_toy.json) through
# `vela train --config ...` once per seed (--seed N --data.seed N: the init, the data order and
# the rollout sampling) and prints one table row per seed: DPO pref_acc and GRPO reward_mean at
# the first logged step, the first logged step at which each reaches 0.9, the best and the last
# logged value, and the wall time of the run. Exit status 1 when a run misses 0.9 within the
# example's max_steps.
#
# usage: examples/rl_seed_sweep.sh [path/to/vela] [seeds...]     (default: build/vela, 0..7)
#   RL_SWEEP_DIR=DIR    keep the data and runs there (default: a temporary directory)
#   RL_SWEEP_ONLY=dpo|grpo   run one objective only
#   RL_SWEEP_ARGS="..." extra `vela train` flags for every run (e.g. "--device cuda")
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VELA=${1:-$ROOT/build/vela}
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(0 1 2 3 4 5 6 7)
[ -x "$VELA" ] || { echo "rl_seed_sweep: no vela binary at $VELA" >&2; exit 2; }
if [ -n "${RL_SWEEP_DIR:-}" ]; then
  dir=$RL_SWEEP_DIR
  mkdir -p "$dir"
else
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
fi
only=${RL_SWEEP_ONLY:-}
read -r -a extra <<<"${RL_SWEEP_ARGS:-}"

python3 "$ROOT/examples/make_rl_toy_data.py" "$dir" >/dev/null
for f in dpo grpo; do
  sed "s#build/rl_toy/tokenizer#$dir/tokenizer#" "$ROOT/examples/${f}_toy_prep.json" > "$dir/${f}_prep.json"
  [ -d "$dir/${f}_shards" ] ||
    "$VELA" preprocess --config "$dir/${f}_prep.json" "$dir/$f.jsonl" -o "$dir/${f}_shards" --quiet >/dev/null
done

# first, first step >= 0.9 (or -), best, last of metric $2 in metrics file $1
summary() {
  python3 - "$1" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
v = [(r["step"], r[sys.argv[2]]) for r in rows if sys.argv[2] in r]
hit = next((s for s, x in v if x >= 0.9), "-")
print(f"{v[0][1]:.3f} {hit} {max(x for _, x in v):.3f} {v[-1][1]:.3f}")
PY
}

fail=0
printf "%-5s | %-44s | %-44s\n" "" "DPO pref_acc" "GRPO reward_mean"
printf "%-5s | %6s %8s %6s %6s %7s | %6s %8s %6s %6s %7s\n" seed first "step>=.9" best last time \
  first "step>=.9" best last time
for s in "${seeds[@]}"; do
  row=$(printf "%-5s" "$s")
  for f in dpo grpo; do
    if [ -n "$only" ] && [ "$only" != "$f" ]; then
      row+=$(printf " | %44s" "")
      continue
    fi
    metric=pref_acc
    [ $f = grpo ] && metric=reward_mean
    out="$dir/${f}_seed$s"
    rm -rf "$out"
    t0=$(date +%s.%N)
    "$VELA" train --config "$ROOT/examples/${f}_toy.json" --model "$ROOT/examples/rl_toy_model.json" \
      --tokenizer "$dir/tokenizer" --data.path "$dir/${f}_shards" --out-dir "$out" --no-progress \
      --seed "$s" --data.seed "$s" "${extra[@]}" >"$out.log" 2>&1 ||
      { echo "seed $s $f: vela train failed (log: $out.log)" >&2; tail -5 "$out.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    read -r first hit best last <<<"$(summary "$out/metrics.jsonl" $metric)"
    [ "$hit" = "-" ] && fail=1
    row+=$(printf " | %6s %8s %6s %6s %6.1fs" "$first" "$hit" "$best" "$last" \
      "$(python3 -c "print($t1 - $t0)")")
  done
  echo "$row"
done
exit $fail
