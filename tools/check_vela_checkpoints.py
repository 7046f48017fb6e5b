#!/usr/bin/env python3
"""Checks that checkpoints written by vela (`vela convert`, the trainer) load in transformers and
give the reference logits. Run on the GPU machine (torch + transformers).

usage: python3 tools/check_vela_checkpoints.py VELA_OUT_DIR [FIXTURES_DIR]
  VELA_OUT_DIR/<name>/ holds vela's rewrite of tests/fixtures/models/<name>/.
Prints one line per model with the max |logit error| and exits non-zero above 1e-4.
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file


def main():
    out_dir = sys.argv[1]
    fixtures = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "models")
    worst = 0.0
    for name in sorted(os.listdir(out_dir)):
        ref_dir = os.path.join(fixtures, name)
        with open(os.path.join(ref_dir, "reference.json")) as f:
            ref = json.load(f)
        ref_logits = load_file(os.path.join(ref_dir, "reference.safetensors"))["logits"]
        model = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.join(out_dir, name), dtype=torch.float32, attn_implementation="eager").eval()
        with torch.no_grad():
            logits = model(torch.tensor([ref["prompt_ids"]])).logits[0].float()
        err = (logits - ref_logits).abs().max().item()
        worst = max(worst, err)
        print(f"{name}: transformers loads vela's checkpoint ({type(model).__name__}), max|err| {err:.3g}")
    print(f"worst {worst:.3g}")
    sys.exit(0 if worst <= 1e-4 else 1)


if __name__ == "__main__":
    main()
