#!/usr/bin/env python3
"""Collects the demo model's training numbers into OUT/train_summary.json (scripts/train_demo.sh
runs it; stdlib only): parameters, steps, tokens seen, losses, held-out perplexity (the
validation loss `vela train` measures on the held-out text), the stage wall times and the
resolved training configs. The model card (models/vela-demo/README.md) quotes this file."""
import argparse
import json
import math
import os


def read_metrics(path):
    steps, vals = [], []
    for line in open(path):
        r = json.loads(line)
        (vals if "val_loss" in r else steps).append(r)
    return steps, vals


def n_params(cfg):
    d, v, n_l, ff = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    hd = cfg.get("head_dim") or d // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    per_layer = d * q + 2 * d * kv + q * d + 3 * d * ff + 2 * d
    return v * d * (1 if cfg.get("tie_word_embeddings") else 2) + n_l * per_layer + d


def stage(work, name):
    cfg = json.load(open(os.path.join(work, name, "train_config.json")))
    steps, vals = read_metrics(os.path.join(work, name, "metrics.jsonl"))
    last = steps[-1]
    seq = json.load(open(os.path.join(cfg["data"]["path"], "index.json")))["config"]["seq_len"]
    rows = cfg["data"]["batch_size"] * cfg.get("grad_accum", 1)
    tokens = sum(r["tokens"] for r in steps)  # logged steps only
    logged = len(steps)
    mean_tokens = tokens / logged
    return {
        "steps": last["step"],
        "batch_rows": rows, "seq_len": seq,
        "tokens_seen": int(round(mean_tokens * last["step"])),
        "target_tokens_seen": int(round(sum(r["target_tokens"] for r in steps) / logged * last["step"])),
        "first_loss": steps[0]["loss"], "final_loss": last["loss"],
        "val_loss": [[v["step"], v["val_loss"]] for v in vals],
        "final_val_loss": vals[-1]["val_loss"] if vals else None,
        "final_val_ppl": math.exp(vals[-1]["val_loss"]) if vals else None,
        "tokens_per_second": sum(r["tokens_per_second"] for r in steps[len(steps) // 2:]) / max(1, len(steps) - len(steps) // 2),
        "config": cfg,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="")
    ap.add_argument("--dtype", default="")
    a = ap.parse_args()
    model_cfg = json.load(open(os.path.join(a.out, "config.json")))
    times = {}
    p = os.path.join(a.work, "stage_seconds.txt")
    if os.path.exists(p):
        for line in open(p):
            k, v = line.split()
            times[k] = float(v)
    summary = {
        "parameters": n_params(model_cfg),
        "model_bytes": os.path.getsize(os.path.join(a.out, "model.safetensors")),
        "device": a.device, "dtype": a.dtype,
        "stage_seconds": times,
        "pretrain": stage(a.work, "pretrain"),
        "sft": stage(a.work, "sft"),
    }
    data = os.path.join(a.work, "data", "data.json")
    if os.path.exists(data):
        summary["data"] = json.load(open(data))
    for s in ("pretrain_train", "pretrain_valid", "sft_train"):
        ix = json.load(open(os.path.join(a.work, "shards", s, "index.json")))
        summary.setdefault("shards", {})[s] = {k: ix[k] for k in ix if k.startswith("n_") and not isinstance(ix[k], dict)}
    json.dump(summary, open(os.path.join(a.out, "train_summary.json"), "w"), indent=1)
    pt, sf = summary["pretrain"], summary["sft"]
    print(f"[demo] {summary['parameters']:,} params; pretrain {pt['steps']} steps, {pt['tokens_seen']:,} tokens, "
          f"val loss {pt['final_val_loss']}; SFT {sf['steps']} steps, val loss {sf['final_val_loss']}")


if __name__ == "__main__":
    main()
