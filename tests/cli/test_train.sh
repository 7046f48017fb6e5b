#!/usr/bin/env bash
# End-to-end `vela train`: a tokenizer trained here, `vela preprocess`, then training from a
# preset with flag overrides; checkpoints (manifest, HF files, tokenizer), metrics.jsonl, a crash
# forced in the middle of a checkpoint write (VELA_CHECKPOINT_ABORT_AT) that leaves the previous
# checkpoint intact, `--resume` to the end, generation through the engine from the checkpoint,
# and clear errors (exit 1, "error:") for an unknown flag and a bad value.
# usage: test_train.sh path/to/vela   (run from tests/)
set -euo pipefail
VELA="$1"
source "$(dirname "$0")/common.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

make_text_corpus "$VELA" "$dir" 3 120

cat > "$dir/train.json" <<JSON
{"out_dir": "$dir/run", "model": "tiny", "seed": 1, "max_steps": 8, "log_every": 1,
 "save_every": 3, "eval_every": 4, "progress": false,
 "data": {"kind": "seq", "path": "$dir/shards", "batch_size": 2, "validation_fraction": 0.1},
 "schedule": {"kind": "cosine", "lr": 0.003, "warmup_steps": 2}}
JSON

# Unknown flags and bad values are errors that name them.
set +e
err=$("$VELA" train --config "$dir/train.json" --max-stepz 3 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "max_stepz" <<<"$err" || { echo "unknown flag: rc=$rc $err"; exit 1; }
err=$("$VELA" train --config "$dir/train.json" --schedule.lr fast 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "schedule.lr" <<<"$err" || { echo "bad value: rc=$rc $err"; exit 1; }
# Die in the middle of the step-6 checkpoint (after its 2nd file is fsync'd).
VELA_CHECKPOINT_ABORT_AT=2 "$VELA" train --config "$dir/train.json" --grad-accum 2 \
  --optimizer.kind muon --no-progress >/dev/null 2>"$dir/crash.log"; rc=$?
set -e
# The first checkpoint (step 3) also died at event 2: nothing was published at all.
[ $rc -eq 86 ] || { echo "expected the forced abort (86), got $rc"; cat "$dir/crash.log"; exit 1; }
[ ! -e "$dir/run/step-00000003" ] || { echo "a partial checkpoint was published"; exit 1; }
ls -A "$dir/run" | grep -q '^\.step-00000003\.staging-' || { echo "no staging debris?"; exit 1; }

# A clean run: checkpoints at 3 and 6; then kill during the step-6 re-publication of a re-run.
"$VELA" train --config "$dir/train.json" --grad-accum 2 --optimizer.kind muon --max-steps 6 >/dev/null
set +e
VELA_CHECKPOINT_ABORT_AT=5:kill "$VELA" train --config "$dir/train.json" --grad-accum 2 \
  --optimizer.kind muon --max-steps 6 --schedule.total-steps 8 >/dev/null 2>&1; rc=$?
set -e
[ $rc -eq 137 ] || [ $rc -eq 9 ] || { echo "expected SIGKILL, got $rc"; exit 1; }
# Resume to step 8 (the schedule spans 8 steps in both runs).
out=$("$VELA" train --config "$dir/train.json" --grad-accum 2 --optimizer.kind muon --resume \
      --schedule.total-steps 8 2>&1)
grep -q "latest checkpoint $dir/run/step-00000008" <<<"$out" || { echo "$out"; exit 1; }

python3 - "$dir/run" <<'PY'
import hashlib, json, os, sys
run = sys.argv[1]
names = sorted(n for n in os.listdir(run))
assert names == ["metrics.jsonl", "step-00000003", "step-00000006", "step-00000008", "train_config.json"], names
for step in (3, 6, 8):
    d = os.path.join(run, "step-%08d" % step)
    m = json.load(open(os.path.join(d, "manifest.json")))
    assert m["format_version"] == 1 and m["step"] == step, m
    for f in ("config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json", "tokenizer.json"):
        assert f in m["files"], (f, m["files"].keys())
    for f, e in m["files"].items():
        data = open(os.path.join(d, f), "rb").read()
        assert len(data) == e["bytes"] and hashlib.sha256(data).hexdigest() == e["sha256"], f
st = json.load(open(os.path.join(run, "step-00000008", "trainer_state.json")))
assert st["step"] == 8 and st["schedule"]["step"] == 8, st
steps = [json.loads(l)["step"] for l in open(os.path.join(run, "metrics.jsonl")) if "val_loss" not in l]
assert steps == list(range(1, 9)), steps
print("train: checkpoints verified, metrics", steps)
PY
"$VELA" generate --model "$dir/run/step-00000008" --prompt "the lord" --max-tokens 5 >/dev/null
# Fine-tune from the checkpoint (weights only; a fresh optimizer, schedule and step count).
out=$("$VELA" train --config "$dir/train.json" --init-from "$dir/run/step-00000008" --model "" \
      --out-dir "$dir/ft" --max-steps 2 --save-every 0 2>&1)
grep -q "latest checkpoint $dir/ft/step-00000002" <<<"$out" || { echo "$out"; exit 1; }
echo "train: crash-safe checkpoints, resume, generation from the checkpoint OK"
