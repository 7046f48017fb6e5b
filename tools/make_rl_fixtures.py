#!/usr/bin/env python3
"""PyTorch goldens for the DPO / cDPO / IPO and GRPO (clipped ratio, k3 KL) losses.

  python3 tools/make_rl_fixtures.py tests/fixtures/rl/rl_losses.json

Independent re-statements of the objectives in torch (TRL's formulas), evaluated in float64 with
autograd for the gradients w.r.t. the log-probs the losses are written over:
  dpo:  per pair (logp_chosen, logp_rejected, ref_chosen, ref_rejected) -> loss, dloss/dlogp_chosen
        (dloss/dlogp_rejected is its negative)
  grpo: per token (logp, behaviour logp, ref logp, advantage) -> loss, dloss/dlogp
tests/train/test_rl_golden.cpp compares vela's dpo_pair_loss / grpo_token_loss with them.
"""
import json
import sys

import torch
import torch.nn.functional as F


def dpo(cfg, n, gen):
    pc = (torch.rand(n, generator=gen, dtype=torch.float64) * -20).requires_grad_()
    pr = torch.rand(n, generator=gen, dtype=torch.float64) * -20
    rc = torch.rand(n, generator=gen, dtype=torch.float64) * -20
    rr = torch.rand(n, generator=gen, dtype=torch.float64) * -20
    logits = (pc - pr) - (rc - rr)
    beta, eps = cfg["beta"], cfg["label_smoothing"]
    if cfg["loss"] == "ipo":
        losses = (logits - 1 / (2 * beta)) ** 2
    else:
        losses = -F.logsigmoid(beta * logits) * (1 - eps) - F.logsigmoid(-beta * logits) * eps
    losses.sum().backward()
    rows = [[pc[i].item(), pr[i].item(), rc[i].item(), rr[i].item(), losses[i].item(),
             pc.grad[i].item()] for i in range(n)]
    return {"config": cfg, "pairs": rows}


def grpo(cfg, n, gen):
    old = torch.rand(n, generator=gen, dtype=torch.float64) * -4
    logp = (old + (torch.rand(n, generator=gen, dtype=torch.float64) - 0.5) * 0.8).requires_grad_()
    ref = old + (torch.rand(n, generator=gen, dtype=torch.float64) - 0.5)
    adv = (torch.rand(n, generator=gen, dtype=torch.float64) - 0.5) * 4
    ratio = torch.exp(logp - old)
    lo, hi = 1 - cfg["clip_eps"], 1 + cfg["clip_eps_high"]
    per_token = -torch.min(ratio * adv, torch.clamp(ratio, lo, hi) * adv)
    if cfg["kl_coef"] > 0:
        per_token = per_token + cfg["kl_coef"] * (torch.exp(ref - logp) - (ref - logp) - 1)
    per_token.sum().backward()
    rows = [[logp[i].item(), old[i].item(), ref[i].item(), adv[i].item(), per_token[i].item(),
             logp.grad[i].item()] for i in range(n)]
    return {"config": cfg, "tokens": rows}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/rl/rl_losses.json"
    gen = torch.Generator().manual_seed(1234)
    fx = {"torch": torch.__version__, "dpo": [], "grpo": []}
    for cfg in [{"beta": 0.1, "loss": "sigmoid", "label_smoothing": 0.0},
                {"beta": 0.5, "loss": "sigmoid", "label_smoothing": 0.2},
                {"beta": 0.3, "loss": "ipo", "label_smoothing": 0.0}]:
        fx["dpo"].append(dpo(cfg, 16, gen))
    for cfg in [{"clip_eps": 0.2, "clip_eps_high": 0.2, "kl_coef": 0.0},
                {"clip_eps": 0.1, "clip_eps_high": 0.28, "kl_coef": 0.05}]:
        fx["grpo"].append(grpo(cfg, 32, gen))
    with open(out, "w") as f:
        json.dump(fx, f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
