#!/usr/bin/env python3
"""LoRA parity: an adapter vela saved (PEFT layout) loaded by Hugging Face PEFT must compute what
vela computes.

1. Loads the base model with transformers and the committed fixture adapter
   (tests/fixtures/lora/<name>/adapter, written by vela's save_lora_adapter) with
   peft.PeftModel.from_pretrained, and compares the logits of every position with vela's
   (tests/fixtures/lora/<name>/vela_logits.json, from the CPU forward of the serving path).
2. With --vela BIN: runs `vela generate --lora` greedily on each --device/--dtype given (the
   engine's batched per-row-adapter kernels, CUDA included) and compares its top-5 logprobs at
   every generated step with PEFT's log-softmax on the same tokens (teacher forcing), and its
   greedy tokens with PEFT's greedy tokens.
Writes a JSON summary (--out) and exits 1 when a tolerance is exceeded.

usage (from the repository root, on the GPU machine):
  python3 tools/lora_peft_check.py --base tests/fixtures/models/qwen3_qknorm \
      --fixture tests/fixtures/lora/qwen3_qknorm_r4 --vela build/vela \
      --engine cpu:f32 --engine cuda:f32 --engine cuda:bf16 --out result.json
"""
import argparse
import json
import subprocess
import sys

import torch
import transformers
import peft
from transformers import AutoModelForCausalLM
from peft import PeftModel

TOL = {"f32": 1e-4, "bf16": 0.15}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--vela")
    ap.add_argument("--engine", action="append", default=[], help="device:dtype")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    adapter = a.fixture + "/adapter"
    ref = json.load(open(a.fixture + "/vela_logits.json"))
    prompt = ref["prompt_ids"]
    base = AutoModelForCausalLM.from_pretrained(a.base, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, adapter)
    model.eval()
    ids = torch.tensor([prompt])
    with torch.no_grad():
        logits = model(ids).logits[0].float()
        with model.disable_adapter():
            base_logits = model(ids).logits[0].float()
    vela = torch.tensor(ref["logits"], dtype=torch.float32).view(logits.shape)
    err = (logits - vela).abs().max().item()
    delta = (logits - base_logits).abs().max().item()
    out = {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "peft": peft.__version__},
        "adapter": adapter,
        "peft_loaded_modules": sorted({n.split(".lora_")[0] for n, _ in model.named_parameters()
                                       if "lora_" in n})[:4] + ["..."],
        "forward": {"max_abs_err_vs_vela": err, "max_abs_adapter_effect": delta,
                    "argmax_equal": bool((logits.argmax(-1) == vela.argmax(-1)).all())},
        "engines": {},
    }
    ok = err <= TOL["f32"] and delta > 100 * err
    print(f"[peft] forward: max |peft - vela| = {err:.3e} (adapter effect {delta:.3e})")

    # PEFT greedy continuation and its per-step log-softmax (teacher forcing on PEFT's tokens).
    seq = list(prompt)
    steps = []
    with torch.no_grad():
        for _ in range(a.max_tokens):
            lp = torch.log_softmax(model(torch.tensor([seq])).logits[0, -1].float(), -1)
            nxt = int(lp.argmax())
            steps.append(lp)
            seq.append(nxt)
    peft_tokens = seq[len(prompt):]
    for spec in a.engine:
        device, dtype = spec.split(":")
        cmd = [a.vela, "generate", "--model", a.base, "--lora", "ft=" + adapter, "--prompt-ids",
               ",".join(map(str, prompt)), "--max-tokens", str(a.max_tokens), "--ignore-eos",
               "--top-logprobs", "5", "--json", "--device", device, "--dtype", dtype]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            print(res.stdout, res.stderr)
            out["engines"][spec] = {"error": res.stderr[-2000:]}
            ok = False
            continue
        j = json.loads(res.stdout.strip().splitlines()[-1])
        worst = 0.0
        n_cmp = 0
        # Compare while the tokens agree (after a divergence the contexts differ).
        for k, (tok, top) in enumerate(zip(j["tokens"], j["top_logprobs"])):
            for e in top:
                worst = max(worst, abs(e["logprob"] - steps[k][e["id"]].item()))
                n_cmp += 1
            if tok != peft_tokens[k]:
                break
        same = j["tokens"] == peft_tokens
        out["engines"][spec] = {"tokens": j["tokens"], "peft_tokens": peft_tokens,
                                "greedy_equal": same, "max_abs_logprob_err": worst,
                                "n_compared": n_cmp}
        print(f"[peft] vela engine {spec}: greedy equal {same}, max |dlogprob| {worst:.3e}")
        ok = ok and worst <= TOL[dtype] and (same or dtype != "f32")
    out["ok"] = ok
    json.dump(out, open(a.out, "w"), indent=2)
    print("[peft]", "OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
