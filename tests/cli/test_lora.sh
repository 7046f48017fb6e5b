#!/usr/bin/env bash
# End-to-end LoRA through the CLI: a base model trained briefly on a small corpus, then a LoRA
# fine-tune of it ("lora" in the train config) that lowers the validation loss with the base
# frozen; its checkpoint holds only the adapter (PEFT layout) and the adapter's optimizer state;
# --resume continues it; `vela generate --lora` == `vela convert --merge-lora` + generate;
# `vela serve --lora` lists the adapters in /v1/models and serves base and adapters side by side
# (each request's tokens equal `vela generate`'s); DPO and GRPO train LoRA adapters on the RL toy
# task against the frozen base (pref_acc and the rollouts' reward rise); bad input is a clear
# error.
# usage: test_lora.sh path/to/vela   (run from tests/)
set -euo pipefail
VELA="$1"
source "$(dirname "$0")/common.sh"
dir=$(mktemp -d)
SERVE_PID=""
cleanup() { [ -n "$SERVE_PID" ] && kill -9 "$SERVE_PID" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

make_text_corpus "$VELA" "$dir" 4 200

# The base: a few full-parameter steps from random init.
cat > "$dir/base.json" <<JSON
{"out_dir": "$dir/base", "model": "tiny", "seed": 1, "max_steps": 6, "log_every": 1,
 "progress": false, "data": {"kind": "seq", "path": "$dir/shards", "batch_size": 4,
 "validation_fraction": 0.1}, "schedule": {"kind": "constant", "lr": 0.003}}
JSON
"$VELA" train --config "$dir/base.json" >/dev/null 2>&1
BASE="$dir/base/step-00000006"

# LoRA on every projection, dropout on; validation every 5 steps.
cat > "$dir/lora.json" <<JSON
{"out_dir": "$dir/ft", "init_from": "$BASE", "seed": 2, "max_steps": 30, "log_every": 5,
 "eval_every": 5, "save_every": 15, "progress": false,
 "lora": {"r": 8, "alpha": 16, "dropout": 0.05, "target_modules": "all-linear"},
 "data": {"kind": "seq", "path": "$dir/shards", "batch_size": 4, "validation_fraction": 0.1},
 "optimizer": {"kind": "adamw", "weight_decay": 0.0},
 "schedule": {"kind": "constant", "lr": 0.01}}
JSON
log=$(VELA_LOG_LEVEL=info "$VELA" train --config "$dir/lora.json" --max-steps 15 2>&1)
grep -q "LoRA r=8" <<<"$log" || { echo "$log"; exit 1; }
"$VELA" train --config "$dir/lora.json" --resume >/dev/null 2>&1
CK="$dir/ft/step-00000030"
python3 - "$dir/ft" "$CK" <<'PY'
import json, os, sys
run, ck = sys.argv[1], sys.argv[2]
val = [json.loads(l)["val_loss"] for l in open(os.path.join(run, "metrics.jsonl")) if "val_loss" in l]
assert len(val) == 6 and val[-1] < val[0] - 0.1, f"LoRA did not lower the validation loss: {val}"
files = sorted(os.listdir(ck))
assert "adapter_model.safetensors" in files and "adapter_config.json" in files, files
assert "model.safetensors" not in files and "config.json" not in files, files
cfg = json.load(open(os.path.join(ck, "adapter_config.json")))
assert cfg["peft_type"] == "LORA" and cfg["r"] == 8 and cfg["lora_alpha"] == 16, cfg
assert len(cfg["target_modules"]) == 7, cfg
def names(p):
    with open(p, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return [k for k in json.loads(f.read(n)) if k != "__metadata__"]
ad = names(os.path.join(ck, "adapter_model.safetensors"))
assert len(ad) == 2 * 7 * 2 and all(k.startswith("base_model.model.model.layers.") for k in ad), ad[:3]
opt = names(os.path.join(ck, "optimizer.safetensors"))
assert opt and all(".lora_" in k for k in opt), [k for k in opt if ".lora_" not in k][:3]
print(f"lora: val_loss {val[0]:.3f} -> {val[-1]:.3f}; adapter {len(ad)} tensors; optimizer state adapter-only")
PY

# Generation with the adapter == generation from the merged model.
gen() { "$VELA" generate --prompt "the lord said" --max-tokens 8 --ignore-eos --json --top-logprobs 1 "$@" | tail -1; }
a=$(gen --model "$BASE" --lora "$CK")
"$VELA" convert --model "$BASE" --merge-lora "$CK" --out "$dir/merged" >/dev/null
m=$(gen --model "$dir/merged")
b=$(gen --model "$BASE")
python3 - "$a" "$m" "$b" <<'PY'
import json, sys
a, m, b = (json.loads(x) for x in sys.argv[1:4])
lp = lambda r: [s[0]["logprob"] for s in r["top_logprobs"]]
assert a["tokens"] == m["tokens"], f"--lora {a['tokens']} != merged {m['tokens']}"
d_merge = max(abs(x - y) for x, y in zip(lp(a), lp(m)))
d_base = max(abs(x - y) for x, y in zip(lp(a), lp(b)))
assert d_merge < 1e-3 and d_base > 1e-2, (d_merge, d_base)
print(f"generate --lora == convert --merge-lora: {a['tokens']} (|dlogprob| {d_merge:.1e}; vs base {d_base:.2f})")
PY

# Serve the base and two adapters (the final and the step-15 checkpoint).
"$VELA" serve --model "$BASE" --host 127.0.0.1 --port 0 --served-model-name base \
  --lora "ft=$CK" --lora "ft15=$dir/ft/step-00000015" 2>"$dir/serve.log" &
SERVE_PID=$!
PORT=""
for _ in $(seq 1 300); do
  PORT=$(sed -n 's|.* on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$dir/serve.log" | head -n 1)
  [ -n "$PORT" ] && break
  kill -0 "$SERVE_PID" 2>/dev/null || { cat "$dir/serve.log"; echo "server died"; exit 1; }
  sleep 0.2
done
[ -n "$PORT" ] || { cat "$dir/serve.log"; echo "server did not start"; exit 1; }
a15=$(gen --model "$BASE" --lora "$dir/ft/step-00000015")
python3 - "http://127.0.0.1:$PORT" "$a" "$a15" "$b" <<'PY'
import json, sys, threading, urllib.request, urllib.error
url, want_ft, want_ft15, want_base = sys.argv[1], *(json.loads(x) for x in sys.argv[2:5])
ids = json.loads(urllib.request.urlopen(url + "/v1/models").read())
names = [m["id"] for m in ids["data"]]
assert names == ["base", "ft", "ft15"], names
def complete(model, out, i):
    body = json.dumps({"model": model, "prompt": "the lord said", "max_tokens": 8, "temperature": 0,
                       "ignore_eos": True, "logprobs": 1}).encode()
    r = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
    out[i] = json.loads(urllib.request.urlopen(r).read())
# Concurrent requests: base and both adapters batched together by the engine.
models = ["ft", "base", "ft15", "ft", "base", "ft15"]
out = [None] * len(models)
ts = [threading.Thread(target=complete, args=(m, out, i)) for i, m in enumerate(models)]
[t.start() for t in ts]
[t.join() for t in ts]
want = {"ft": want_ft, "ft15": want_ft15, "base": want_base}
for m, o in zip(models, out):
    assert o["model"] == m, o["model"]
    c = o["choices"][0]
    assert c["text"] == want[m]["text"], (m, c["text"], want[m]["text"])
    got = c["logprobs"]["token_logprobs"]
    ref = [s[0]["logprob"] for s in want[m]["top_logprobs"]]
    assert max(abs(x - y) for x, y in zip(got, ref)) < 1e-4, (m, got, ref)
lps = {m: tuple(round(s[0]["logprob"], 3) for s in w["top_logprobs"]) for m, w in want.items()}
assert len(set(lps.values())) == 3, lps
try:
    complete("nope", [None], 0)
    raise SystemExit("unknown model accepted")
except urllib.error.HTTPError as e:
    assert e.code == 404 and "ft15" in e.read().decode(), e
print("serve --lora: /v1/models", names, "; concurrent base/adapter requests consistent")
PY
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; SERVE_PID=""

# DPO and GRPO train LoRA adapters on the RL toy task (examples/*_toy_lora.json). A LoRA adapter
# cannot learn it on a random base (the frozen tied embeddings and norms bound the logits: see
# docs/rl.md), so the base is a short full-parameter SFT (examples/rl_toy_base.json) that mostly
# copies the prompt's digit; the adapters must make it answer the next one. The reference of both
# is that frozen base (B = 0).
# The base's SFT must get past the point where the model starts reading the prompt (a sudden drop
# of the loss, step ~300-450 of 500 at the seeds tried; some data seeds need longer): data seed 0
# does, so the runs below are fixed to it (and to RL seed 3), one thread: bit-reproducible.
make_rl_toy "$VELA" "$dir/rl" 0
rl=(--tokenizer "$dir/rl/tokenizer" --no-progress --threads 1 --seed 3 --data.seed 3)
"$VELA" train --config "$ROOT/examples/rl_toy_base.json" --model "$ROOT/examples/rl_toy_model.json" \
  --tokenizer "$dir/rl/tokenizer" --no-progress --threads 1 --data.path "$dir/rl/base_shards" \
  --out-dir "$dir/rlbase" >/dev/null 2>&1
RLBASE="$dir/rlbase/step-00000500"
for f in dpo grpo; do
  VELA_LOG_LEVEL=info "$VELA" train --config "$ROOT/examples/${f}_toy_lora.json" "${rl[@]}" \
    --init-from "$RLBASE" --data.path "$dir/rl/${f}_shards" --out-dir "$dir/$f" --log-every 5 \
    >"$dir/$f.log" 2>&1 || { cat "$dir/$f.log"; exit 1; }
  grep -q "the frozen base" "$dir/$f.log" || { echo "$f: no frozen-base reference"; cat "$dir/$f.log"; exit 1; }
done
python3 - "$dir" <<'PY'
import json, os, sys
d = sys.argv[1]
def rows(f):
    return [json.loads(l) for l in open(f"{d}/{f}/metrics.jsonl")]
for f in ("dpo", "grpo"):
    ck = sorted(x for x in os.listdir(f"{d}/{f}") if x.startswith("step-"))[-1]
    files = os.listdir(f"{d}/{f}/{ck}")
    assert "adapter_model.safetensors" in files and "model.safetensors" not in files, files
# DPO: the preference accuracy of the implicit rewards (0 at step 1: B = 0 gives every pair the
# same reward) reaches a clear level and the margin grows. Each logged pref_acc is one batch of 32
# pairs (+-0.06), so the check is the mean of the last five logged steps: 0.887-0.994 over RL
# seeds 1-10 (docs/rl.md); the test's seed 3 gives 0.963. (As DPO tends to, it gets there mostly
# by lowering the rejected answers' log-probs; the chosen one's stays about where it was.)
r = rows("dpo")
acc = [x["pref_acc"] for x in r]
margin = [x["reward_margin"] for x in r]
lpr = [x["logp_rejected"] for x in r]
late = sum(acc[-5:]) / 5
print(f"dpo + LoRA: pref_acc {' '.join(f'{a:.2f}' for a in acc)}; margin {margin[0]:.2f} -> "
      f"{margin[-1]:.2f}; logp_rejected {lpr[0]:.2f} -> {lpr[-1]:.2f}")
assert late >= 0.85 and margin[-1] > margin[0] + 0.5 and lpr[-1] < lpr[0] - 1, (acc, margin, lpr)
# GRPO: the reward of the rollouts (base + adapter) rises from the base's level: the mean of the
# last ten logged steps is at least 1.6x that of the first five, and at least 0.15. Each logged
# value is one batch of 128 rollouts, so the means are over 1,280 and 640 of them. How far it
# rises depends on the CPU's kernels (the trajectory is chaotic): seed 3 reached 0.56 over the last
# five on an AVX-512 machine and 0.19 on an AVX2-only EPYC (first five 0.10, last ten 0.20;
# seeds 6 / 1 there: 0.08 -> 0.23, 0.08 -> 0.34; docs/rl.md).
r = rows("grpo")
rew = [x["reward_mean"] for x in r]
early, late = sum(rew[:5]) / 5, sum(rew[-10:]) / 10
print(f"grpo + LoRA: reward_mean {' '.join(f'{a:.2f}' for a in rew)} (first five {early:.2f}, "
      f"last ten {late:.2f})")
assert late >= max(0.15, 1.6 * early), rew
PY
# Clear errors.
set +e
err=$("$VELA" train --config "$dir/lora.json" --out-dir "$dir/bad" --lora.r 0 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "lora" <<<"$err" || { echo "bad lora.r: rc=$rc $err"; exit 1; }
err=$("$VELA" generate --model "$BASE" --lora "$dir/nothing" --prompt "x" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "adapter_config.json" <<<"$err" || { echo "missing adapter: rc=$rc $err"; exit 1; }
set -e
echo "lora: train, resume, generate, merge, serve, DPO and GRPO OK"
