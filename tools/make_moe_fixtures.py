#!/usr/bin/env python3
"""Makes the mixture-of-experts reference models and gradients vela's MoE tests compare against
(run on the GPU machine, where torch + transformers are installed; the work runs on the CPU).

Model fixtures, as tools/make_model_fixtures.py makes them (tests/fixtures/models/<name>/:
config.json, model.safetensors, reference.safetensors (prompt logits [T, V] f32),
reference.json (prompt ids, greedy continuation, top-2 margins, versions)), for tiny random
Qwen3-MoE, Mixtral and Qwen2-MoE (shared expert) models. Two layouts are written:
  "as saved"   whatever this transformers version's save_pretrained writes (5.x: config with
               its own key names; experts possibly fused into one tensor per projection)
  "hub"        the layout of the Hub checkpoints: 4.x config dialect (rope_theta, torch_dtype,
               num_experts / num_local_experts) and one tensor per expert
               (mlp.experts.<e>.{gate,up,down}_proj.weight; Mixtral block_sparse_moe.gate and
               block_sparse_moe.experts.<e>.{w1,w3,w2}.weight)
A hub-layout directory is re-loaded with from_pretrained and its logits compared with the
original model's (printed as "hub reload max|err|"): that checks the layout conversion here with
transformers' own loader.

Gradient fixtures (tests/fixtures/grads/<name>.safetensors), float64: one [2, 16] batch (no
packing, some targets ignored), loss = mean CE over the targets
  + router_aux_loss_coef * aux + router_z_loss_coef * z over the routers of every MoE layer,
aux = E * sum_e f_e * P_e (Switch / transformers load_balancing_loss_func without a mask) and
z = mean logsumexp(router logits)^2; the router logits are recomputed from each router's input
(a forward hook) so the math does not depend on what the router module returns. transformers'
own aux_loss is printed next to it. Gradients are stored in vela's parameter layout
(grad.model.layers.<l>.mlp.gate.weight, grad...mlp.experts.gate_up_proj [E, 2I, H],
grad...mlp.experts.down_proj [E, H, I]; everything else under its HF name).

usage: python3 tools/make_moe_fixtures.py [--models DIR] [--grads DIR] [--only a,b] [--grads-only]
"""
import argparse
import json
import os
import re
import sys
import zlib

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file

VOCAB = 128
BASE = dict(vocab_size=VOCAB, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6, initializer_range=0.3,
            bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
ROPE_THETA = 10000.0
PROMPT_LEN = 24
GREEDY_STEPS = 8

# name -> (architecture, config overrides, layout, router loss coefficients (aux, z) or None)
VARIANTS = {
    "qwen3_moe": ("Qwen3MoeForCausalLM",
                  dict(num_hidden_layers=3, intermediate_size=96, moe_intermediate_size=32,
                       num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
                       decoder_sparse_step=1, mlp_only_layers=[1], use_sliding_window=False,
                       attention_bias=False),
                  "saved", (0.5, 0.1)),
    "qwen3_moe_hub": ("Qwen3MoeForCausalLM",
                      dict(num_hidden_layers=2, intermediate_size=80, moe_intermediate_size=24,
                           num_experts=6, num_experts_per_tok=3, norm_topk_prob=False,
                           decoder_sparse_step=1, mlp_only_layers=[], use_sliding_window=False,
                           attention_bias=False),
                      "hub", None),
    "mixtral": ("MixtralForCausalLM",
                dict(num_hidden_layers=2, intermediate_size=48, num_local_experts=4,
                     num_experts_per_tok=2, sliding_window=None),
                "saved", (0.5, 0.1)),
    "mixtral_hub": ("MixtralForCausalLM",
                    dict(num_hidden_layers=2, intermediate_size=40, num_local_experts=4,
                         num_experts_per_tok=2, sliding_window=None),
                    "hub", None),
    "qwen2_moe_shared": ("Qwen2MoeForCausalLM",
                         dict(num_hidden_layers=2, intermediate_size=80, moe_intermediate_size=24,
                              num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
                              shared_expert_intermediate_size=40, decoder_sparse_step=1,
                              mlp_only_layers=[], use_sliding_window=False),
                         "saved", (0.5, 0.1)),
}
GRAD_BATCH, GRAD_SEQ, PROMPT_MASK = 2, 16, 4
IGNORE = -100


def n_experts_of(cfg):
    return getattr(cfg, "num_experts", None) or getattr(cfg, "num_local_experts")


def expert_inter_of(cfg, arch):
    return cfg.intermediate_size if arch.startswith("Mixtral") else cfg.moe_intermediate_size


def expert_tensors(sd, cfg, arch):
    """{layer: (router [E, H], gate_up [E, 2I, H], down [E, H, I], prefix)} from any layout."""
    E, I, H = n_experts_of(cfg), expert_inter_of(cfg, arch), cfg.hidden_size
    out = {}
    for key in sd:
        m = re.match(r"model\.layers\.(\d+)\.(mlp|block_sparse_moe)\.gate\.weight$", key)
        if not m:
            continue
        layer, pre = int(m.group(1)), f"model.layers.{m.group(1)}.{m.group(2)}"
        router = sd[key]
        fused = [k for k in (pre + ".experts.gate_up_proj", pre + ".experts.gate_up_proj.weight") if k in sd]
        if fused:
            gu = sd[fused[0]]
            dn = sd[[k for k in (pre + ".experts.down_proj", pre + ".experts.down_proj.weight") if k in sd][0]]
            if tuple(gu.shape) != (E, 2 * I, H):
                gu = gu.transpose(1, 2)
            if tuple(dn.shape) != (E, H, I):
                dn = dn.transpose(1, 2)
            assert tuple(gu.shape) == (E, 2 * I, H) and tuple(dn.shape) == (E, H, I), (gu.shape, dn.shape)
        else:
            names = ("w1", "w3", "w2") if pre + ".experts.0.w1.weight" in sd else ("gate_proj", "up_proj", "down_proj")
            gu = torch.stack([torch.cat([sd[f"{pre}.experts.{e}.{names[0]}.weight"],
                                         sd[f"{pre}.experts.{e}.{names[1]}.weight"]], 0) for e in range(E)])
            dn = torch.stack([sd[f"{pre}.experts.{e}.{names[2]}.weight"] for e in range(E)])
        out[layer] = (router, gu, dn, pre)
    return out


def hub_state_dict(sd, cfg, arch):
    """The state dict in the Hub's per-expert layout."""
    mixtral = arch.startswith("Mixtral")
    experts = expert_tensors(sd, cfg, arch)
    I = expert_inter_of(cfg, arch)
    out = {}
    for k, v in sd.items():
        m = re.match(r"model\.layers\.(\d+)\.(mlp|block_sparse_moe)\.(gate\.weight|experts\..*)$", k)
        if m and int(m.group(1)) in experts:
            continue
        out[k] = v
    for layer, (router, gu, dn, _) in experts.items():
        pre = f"model.layers.{layer}." + ("block_sparse_moe" if mixtral else "mlp")
        names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
        out[pre + ".gate.weight"] = router
        for e in range(gu.shape[0]):
            out[f"{pre}.experts.{e}.{names[0]}.weight"] = gu[e, :I]
            out[f"{pre}.experts.{e}.{names[1]}.weight"] = gu[e, I:]
            out[f"{pre}.experts.{e}.{names[2]}.weight"] = dn[e]
    return {k: v.detach().float().contiguous().clone() for k, v in out.items()}


def to_hub_config(cfg: dict, arch: str) -> dict:
    cfg = dict(cfg)
    rope = cfg.pop("rope_parameters", None) or {}
    cfg["rope_theta"] = rope.get("rope_theta", cfg.get("rope_theta", ROPE_THETA))
    cfg["rope_scaling"] = None
    if "dtype" in cfg:
        cfg["torch_dtype"] = cfg.pop("dtype")
    if arch.startswith("Mixtral"):
        if "num_experts" in cfg:
            cfg["num_local_experts"] = cfg.pop("num_experts")
    elif "num_local_experts" in cfg:
        cfg["num_experts"] = cfg.pop("num_local_experts")
    return cfg


def load(path, dtype, **extra):
    try:
        return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="eager", **extra)
    except TypeError:
        return transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype, attn_implementation="eager", **extra)


def load_for_grads(path):
    """The model in float64 with the per-expert ("eager") expert loop: transformers 5's default
    grouped_mm experts reject float64 (the first run of this script failed there)."""
    for extra in ({"experts_implementation": "eager"}, {}):
        try:
            model = load(path, torch.float64, **extra)
        except (TypeError, ValueError) as e:
            print(f"load {extra}: {type(e).__name__}: {e}")
            continue
        for attr in ("_experts_implementation", "experts_implementation"):
            if hasattr(model.config, attr):
                try:
                    setattr(model.config, attr, "eager")
                except Exception:  # noqa: BLE001 - best effort
                    pass
        return model.double().eval()
    raise RuntimeError(f"cannot load {path}")


def make_model(name, arch, overrides, layout, coefs, out_root):
    torch.manual_seed(zlib.crc32(name.encode()))
    cls = getattr(transformers, arch)
    kw = dict(BASE)
    kw.update(overrides)
    if coefs is not None:
        kw.update(router_aux_loss_coef=coefs[0], output_router_logits=True, router_z_loss_coef=coefs[1])
    if int(transformers.__version__.split(".")[0]) >= 5:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": ROPE_THETA}
    else:
        kw["rope_theta"] = ROPE_THETA
    config = cls.config_class(**kw)
    config._attn_implementation = "eager"
    model = cls(config).eval().float()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif n.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "experts" in n or n.endswith("mlp.gate.weight") or n.endswith("moe.gate.weight"):
                p.copy_(0.3 * torch.randn_like(p))  # routers with clear top-k margins
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    cfg_path = os.path.join(out_dir, "config.json")
    with open(cfg_path) as f:
        saved_cfg = json.load(f)
    saved_keys = sorted(load_file(os.path.join(out_dir, "model.safetensors")).keys())
    print(f"{name}: save_pretrained wrote {len(saved_keys)} tensors, e.g. "
          f"{[k for k in saved_keys if 'layers.0.' in k and ('mlp' in k or 'moe' in k)][:6]}")
    print(f"{name}: config keys {sorted(saved_cfg.keys())}")
    g = torch.Generator().manual_seed(1234)
    prompt = torch.randint(3, VOCAB, (1, PROMPT_LEN), generator=g)
    with torch.no_grad():
        logits = model(prompt).logits[0].float().contiguous()
        seq = prompt.clone()
        greedy, margins = [], []
        for _ in range(GREEDY_STEPS):
            last = model(seq).logits[0, -1]
            top2 = torch.topk(last, 2)
            greedy.append(int(top2.indices[0]))
            margins.append(float(top2.values[0] - top2.values[1]))
            seq = torch.cat([seq, top2.indices[:1].view(1, 1)], dim=1)
    info = {"architecture": arch, "layout": layout, "prompt_ids": prompt[0].tolist(),
            "greedy_ids": greedy, "greedy_margins": margins,
            "transformers": transformers.__version__, "torch": torch.__version__}
    if layout == "hub":
        sd = hub_state_dict(model.state_dict(), config, arch)
        os.remove(os.path.join(out_dir, "model.safetensors"))
        save_file(sd, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
        with open(cfg_path, "w") as f:
            json.dump(to_hub_config(saved_cfg, arch), f, indent=2)
        try:
            back = load(out_dir, torch.float32).eval()
            with torch.no_grad():
                err = float((back(prompt).logits[0].float() - logits).abs().max())
            info["hub_reload_max_err"] = err
            print(f"{name}: hub reload max|err| {err:.3g}")
        except Exception as e:  # noqa: BLE001 - reported, the fixture stays
            info["hub_reload_error"] = f"{type(e).__name__}: {e}"
            print(f"WARNING {name}: transformers could not reload the hub layout: {e}")
    save_file({"logits": logits}, os.path.join(out_dir, "reference.safetensors"))
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, min margin {min(margins):.4f}")
    return model


def grad_fixture(name, arch, coefs, models_root, out_root):
    model = load_for_grads(os.path.join(models_root, name))
    cfg = model.config
    E, k = n_experts_of(cfg), cfg.num_experts_per_tok
    routers = []  # (layer, router input) per MoE layer, in forward order

    def hook_for(layer, gate):
        def hook(module, args, output):
            routers.append((layer, F.linear(args[0].reshape(-1, args[0].shape[-1]), gate.weight)))
        return hook

    handles = []
    for layer, blk in enumerate(model.model.layers):
        mlp = getattr(blk, "mlp", None)
        moe = mlp if mlp is not None and hasattr(mlp, "gate") and hasattr(mlp, "experts") else \
            getattr(blk, "block_sparse_moe", None)
        if moe is not None and hasattr(moe, "gate"):
            handles.append(moe.gate.register_forward_hook(hook_for(layer, moe.gate)))
    g = torch.Generator().manual_seed(4321)
    ids = torch.randint(3, VOCAB, (GRAD_BATCH, GRAD_SEQ), generator=g)
    targets = torch.full_like(ids, IGNORE)
    targets[:, :-1] = ids[:, 1:]
    targets[0, :PROMPT_MASK] = IGNORE
    n_targets = int((targets != IGNORE).sum())
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, output_router_logits=True)
    ce = F.cross_entropy(out.logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=IGNORE,
                         reduction="sum") / n_targets
    logits = torch.cat([r for _, r in routers], 0)  # [n_moe_layers * tokens, E]
    probs = F.softmax(logits, dim=-1)
    top = torch.topk(probs, k, dim=-1).indices
    f = F.one_hot(top, E).double().sum(1).mean(0)  # [E] selections per row
    aux = E * (f * probs.mean(0)).sum()
    z = (torch.logsumexp(logits, dim=-1) ** 2).mean()
    hf_aux = getattr(out, "aux_loss", None)
    print(f"{name}: aux (formula) {float(aux):.8f}, transformers aux_loss "
          f"{float(hf_aux) if hf_aux is not None else None}, z {float(z):.6f}, "
          f"{len(routers)} routers")
    loss = ce + coefs[0] * aux + coefs[1] * z
    loss.backward()
    for h in handles:
        h.remove()
    tensors = {"ids": ids.to(torch.int32), "targets": targets.to(torch.int32),
               "doc_ids": torch.zeros_like(ids, dtype=torch.int32),
               "positions": torch.arange(GRAD_SEQ, dtype=torch.int32).repeat(GRAD_BATCH, 1),
               "loss": loss.detach().float().reshape(1)}
    grads = {n: p.grad.detach() for n, p in model.named_parameters()}
    for n, gr in grads.items():
        if gr is None or not torch.isfinite(gr).all():
            sys.exit(f"{name}: gradient of {n} is missing or not finite")
    experts = expert_tensors(grads, cfg, arch)
    moe_keys = set()
    for layer, (dr, dgu, ddn, pre) in experts.items():
        base = f"grad.model.layers.{layer}.mlp."
        tensors[base + "gate.weight"] = dr
        tensors[base + "experts.gate_up_proj"] = dgu
        tensors[base + "experts.down_proj"] = ddn
        moe_keys |= {n for n in grads if n.startswith(pre + ".gate.") or n.startswith(pre + ".experts.")}
    for n, gr in grads.items():
        if n not in moe_keys:
            tensors["grad." + n] = gr
    tensors = {k: v.float().contiguous() for k, v in tensors.items()} | \
        {k: tensors[k].contiguous() for k in ("ids", "targets", "doc_ids", "positions")}
    meta = {"model": name, "label_smoothing": "0.0", "n_target_tokens": str(n_targets),
            "loss_f64": repr(float(loss)), "ce_f64": repr(float(ce)), "aux_f64": repr(float(aux)),
            "z_f64": repr(float(z)), "transformers_aux": repr(float(hf_aux)) if hf_aux is not None else "",
            "transformers": transformers.__version__, "torch": torch.__version__}
    os.makedirs(out_root, exist_ok=True)
    path = os.path.join(out_root, name + ".safetensors")
    save_file(tensors, path, metadata=meta)
    print(f"{name}: wrote {path}: loss {float(loss):.6f} (ce {float(ce):.6f}), "
          f"{sum(1 for t in tensors if t.startswith('grad.'))} gradients")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.join(here, "..", "tests", "fixtures", "models"))
    ap.add_argument("--grads", default=os.path.join(here, "..", "tests", "fixtures", "grads"))
    ap.add_argument("--only", default="")
    ap.add_argument("--grads-only", action="store_true",
                    help="keep the model fixtures in --models, make only the gradient fixtures")
    args = ap.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    failed = []
    for name, (arch, overrides, layout, coefs) in VARIANTS.items():
        if args.only and name not in args.only.split(","):
            continue
        try:
            if not args.grads_only:
                make_model(name, arch, overrides, layout, coefs, args.models)
            if coefs is not None:
                grad_fixture(name, arch, coefs, args.models, args.grads)
        except Exception as e:  # noqa: BLE001 - the other variants still get made
            import traceback
            traceback.print_exc()
            failed.append(name)
            print(f"FAILED {name}: {type(e).__name__}: {e}")
    if failed:
        sys.exit(f"failed: {failed}")


if __name__ == "__main__":
    main()
