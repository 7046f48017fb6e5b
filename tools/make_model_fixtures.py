#!/usr/bin/env python3
"""Makes the small reference models vela's model tests compare against (run on the GPU machine,
where torch + transformers are installed; CPU is fine too).

For each variant: a random model of a real transformers class is saved with save_pretrained
(safetensors, f32), and its outputs on a fixed prompt are recorded:
  tests/fixtures/models/<name>/config.json, model.safetensors      the checkpoint
  tests/fixtures/models/<name>/reference.safetensors               logits [T, V] f32 of the prompt
  tests/fixtures/models/<name>/reference.json                      prompt ids, greedy continuation,
                                                                   per-step top-2 margin, versions
Half of the configs are rewritten in the transformers 4.x dialect (top-level rope_theta /
rope_scaling with "type" or "rope_type", torch_dtype), the rest keep the 5.x dialect
(rope_parameters, dtype): vela must read both.

usage: python3 tools/make_model_fixtures.py [--out tests/fixtures/models] [--only name,name]
"""
import argparse
import json
import os
import zlib

import torch
import transformers
from safetensors.torch import save_file

VOCAB = 128
BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            rms_norm_eps=1e-6, initializer_range=0.3, bos_token_id=1, eos_token_id=2,
            tie_word_embeddings=False)

# name -> (architecture, config overrides, rope parameters, dialect)
VARIANTS = {
    "llama_gqa": ("LlamaForCausalLM", {}, {"rope_type": "default", "rope_theta": 10000.0}, "v5"),
    "llama_mha_tied_linear": ("LlamaForCausalLM", {"num_key_value_heads": 4, "tie_word_embeddings": True},
                              {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}, "v4_type"),
    "llama_mqa_dynamic": ("LlamaForCausalLM", {"num_key_value_heads": 1, "max_position_embeddings": 16},
                          {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}, "v4_rope_type"),
    "llama3_scaling": ("LlamaForCausalLM", {},
                       {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 16, "rope_theta": 500000.0}, "v5"),
    "llama_yarn": ("LlamaForCausalLM", {"max_position_embeddings": 128},
                   {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32,
                    "rope_theta": 10000.0}, "v4_rope_type"),
    "mistral_gqa": ("MistralForCausalLM", {"sliding_window": None, "head_dim": 16},
                    {"rope_type": "default", "rope_theta": 1000000.0}, "v5"),
    "qwen2_bias_tied": ("Qwen2ForCausalLM", {"tie_word_embeddings": True, "use_sliding_window": False},
                        {"rope_type": "default", "rope_theta": 1000000.0}, "v4_plain"),
    "qwen3_qknorm": ("Qwen3ForCausalLM", {"head_dim": 32, "attention_bias": False, "use_sliding_window": False},
                     {"rope_type": "default", "rope_theta": 1000000.0}, "v5"),
    "qwen3_yarn_mha": ("Qwen3ForCausalLM", {"head_dim": 16, "num_key_value_heads": 4, "max_position_embeddings": 128,
                                            "use_sliding_window": False},
                       {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64,
                        "rope_theta": 10000.0}, "v4_type"),
    # Head sizes other than the 16 / 32 of the variants above, as published models use them (the
    # CUDA kernels run exact tiles for 64 / 128 / 256 and zero-padded tiles for the rest).
    "qwen3_hd48": ("Qwen3ForCausalLM", {"head_dim": 48, "attention_bias": False, "use_sliding_window": False},
                   {"rope_type": "default", "rope_theta": 1000000.0}, "v5"),
    "llama_hd80_mha": ("LlamaForCausalLM", {"head_dim": 80, "num_key_value_heads": 4},
                       {"rope_type": "default", "rope_theta": 10000.0}, "v4_plain"),
    "mistral_hd96_mqa": ("MistralForCausalLM", {"sliding_window": None, "head_dim": 96, "num_key_value_heads": 1},
                         {"rope_type": "default", "rope_theta": 1000000.0}, "v5"),
    "qwen3_hd256": ("Qwen3ForCausalLM", {"head_dim": 256, "num_attention_heads": 2, "num_key_value_heads": 1,
                                         "attention_bias": False, "use_sliding_window": False},
                    {"rope_type": "default", "rope_theta": 1000000.0}, "v4_plain"),
}

PROMPT_LEN = 24      # > 16 so dynamic NTK kicks in for llama_mqa_dynamic
GREEDY_STEPS = 8


def to_v4_dialect(cfg: dict, rope: dict, key: str) -> dict:
    """Rewrites a transformers-5 config.json dict into the 4.x dialect."""
    cfg = dict(cfg)
    cfg.pop("rope_parameters", None)
    cfg["rope_theta"] = rope["rope_theta"]
    if "dtype" in cfg:
        cfg["torch_dtype"] = cfg.pop("dtype")
    scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
    if scaling.get("rope_type", "default") == "default" or key == "plain":
        cfg["rope_scaling"] = None
    else:
        t = scaling.pop("rope_type")
        scaling["type" if key == "type" else "rope_type"] = t
        cfg["rope_scaling"] = scaling
    return cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "models"))
    ap.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    unknown = only - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants: {sorted(unknown)}")
    torch.manual_seed(0)
    for name, (arch, overrides, rope, dialect) in VARIANTS.items():
        if only and name not in only:
            continue
        torch.manual_seed(zlib.crc32(name.encode()))
        cls = getattr(transformers, arch)
        config_cls = cls.config_class
        kw = dict(BASE)
        kw.update(overrides)
        if int(transformers.__version__.split(".")[0]) >= 5:
            kw["rope_parameters"] = dict(rope)
        else:  # transformers 4.x: rope_theta + rope_scaling
            kw["rope_theta"] = rope["rope_theta"]
            scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
            kw["rope_scaling"] = None if scaling.get("rope_type") == "default" else scaling
        config = config_cls(**kw)
        config._attn_implementation = "eager"
        model = cls(config).eval().float()
        # Norm weights away from 1 so a missing norm is visible; biases random too.
        with torch.no_grad():
            for n, p in model.named_parameters():
                if n.endswith("norm.weight"):
                    p.copy_(1.0 + 0.2 * torch.randn_like(p))
                elif n.endswith(".bias"):
                    p.copy_(0.1 * torch.randn_like(p))
        out_dir = os.path.join(args.out, name)
        os.makedirs(out_dir, exist_ok=True)
        model.save_pretrained(out_dir, safe_serialization=True)
        cfg_path = os.path.join(out_dir, "config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        if dialect.startswith("v4"):
            cfg = to_v4_dialect(cfg, rope, dialect.split("_", 1)[1])
            with open(cfg_path, "w") as f:
                json.dump(cfg, f, indent=2)
        g = torch.Generator().manual_seed(1234)
        prompt = torch.randint(3, VOCAB, (1, PROMPT_LEN), generator=g)
        with torch.no_grad():
            logits = model(prompt).logits[0].float().contiguous()
            # Greedy continuation without cache (recomputes the whole sequence each step, the plainest
            # reference), recording the top-1/top-2 margin so flaky near-ties are visible.
            seq = prompt.clone()
            greedy, margins = [], []
            for _ in range(GREEDY_STEPS):
                last = model(seq).logits[0, -1]
                top2 = torch.topk(last, 2)
                greedy.append(int(top2.indices[0]))
                margins.append(float(top2.values[0] - top2.values[1]))
                seq = torch.cat([seq, top2.indices[:1].view(1, 1)], dim=1)
        save_file({"logits": logits}, os.path.join(out_dir, "reference.safetensors"))
        with open(os.path.join(out_dir, "reference.json"), "w") as f:
            json.dump({"architecture": arch, "dialect": dialect, "prompt_ids": prompt[0].tolist(),
                       "greedy_ids": greedy, "greedy_margins": margins,
                       "transformers": transformers.__version__, "torch": torch.__version__}, f, indent=2)
        print(f"{name}: {sum(p.numel() for p in model.parameters())} params, min margin {min(margins):.4f}")


if __name__ == "__main__":
    main()
