#!/usr/bin/env python3
"""Writes a random-weight checkpoint of a published model shape (bf16 safetensors + config.json)
next to a real tokenizer, for start-up and serving benchmarks (vela serve / generate on the GPU
machine; bench/startup_bench.py). Random weights generate arbitrary tokens: use --ignore-eos /
ignore_eos. Needs torch and safetensors (the GPU machine has both; a CUDA device makes it fast).

  python3 tools/make_bench_checkpoint.py --shape qwen3-1.7b --tokenizer DIR --out /tmp/qwen3-1.7b
"""
import argparse
import json
import os
import shutil
import time

SHAPES = {
    # Qwen/Qwen3-1.7B's config.json (architecture fields; weights random).
    "qwen3-1.7b": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
        "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
        "hidden_act": "silu", "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "rope_scaling": None, "tie_word_embeddings": True,
        "attention_bias": False, "bos_token_id": 151643, "eos_token_id": 151645,
        "torch_dtype": "bfloat16",
    },
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="qwen3-1.7b", choices=sorted(SHAPES))
    ap.add_argument("--tokenizer", required=True, help="directory with tokenizer.json (+ tokenizer_config.json)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--std", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch
    from safetensors.torch import save_file

    cfg = SHAPES[args.shape]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=dev).manual_seed(args.seed)
    h, inter, n_layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    hd, nh, nkv, vocab = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]

    def normal(*shape):
        return (torch.randn(*shape, generator=g, device=dev, dtype=torch.float32) * args.std).to(torch.bfloat16).cpu()

    def ones(n):
        return torch.ones(n, dtype=torch.bfloat16)

    t0 = time.time()
    tensors = {"model.embed_tokens.weight": normal(vocab, h), "model.norm.weight": ones(h)}
    if not cfg["tie_word_embeddings"]:
        tensors["lm_head.weight"] = normal(vocab, h)
    for i in range(n_layers):
        p = f"model.layers.{i}."
        tensors[p + "input_layernorm.weight"] = ones(h)
        tensors[p + "post_attention_layernorm.weight"] = ones(h)
        tensors[p + "self_attn.q_proj.weight"] = normal(nh * hd, h)
        tensors[p + "self_attn.k_proj.weight"] = normal(nkv * hd, h)
        tensors[p + "self_attn.v_proj.weight"] = normal(nkv * hd, h)
        tensors[p + "self_attn.o_proj.weight"] = normal(h, nh * hd)
        if cfg["model_type"] == "qwen3":
            tensors[p + "self_attn.q_norm.weight"] = ones(hd)
            tensors[p + "self_attn.k_norm.weight"] = ones(hd)
        tensors[p + "mlp.gate_proj.weight"] = normal(inter, h)
        tensors[p + "mlp.up_proj.weight"] = normal(inter, h)
        tensors[p + "mlp.down_proj.weight"] = normal(h, inter)
    os.makedirs(args.out, exist_ok=True)
    save_file(tensors, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
        src = os.path.join(args.tokenizer, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(args.out, name))
    n = sum(t.numel() for t in tensors.values())
    print(f"wrote {args.out}: {args.shape}, {n / 1e9:.2f}B params bf16 in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
