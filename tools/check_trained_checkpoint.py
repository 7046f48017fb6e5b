#!/usr/bin/env python3
"""Checks that a checkpoint written by `vela train` loads in transformers and agrees with vela:
greedy continuation of a prompt and the log-probabilities vela reported for it.
Run on the GPU machine (torch + transformers).
usage: python3 tools/check_trained_checkpoint.py CHECKPOINT_DIR VELA_GENERATE_JSON PROMPT_IDS
  VELA_GENERATE_JSON: the output of `vela generate --model CHECKPOINT_DIR --prompt-ids PROMPT_IDS
  --max-tokens N --temperature 0 --ignore-eos --json --top-logprobs 1` (f32, CPU).
Prints the token agreement and the max |logprob| difference; exits non-zero on a mismatch.
"""
import json
import sys

import torch
import transformers


def main():
    ckpt, gen_path = sys.argv[1], sys.argv[2]
    gen = json.load(open(gen_path))
    prompt = [int(x) for x in sys.argv[3].split(",")]
    want = gen["tokens"]
    model = transformers.AutoModelForCausalLM.from_pretrained(
        ckpt, dtype=torch.float32, attn_implementation="eager").eval()
    seq = list(prompt)
    worst = 0.0
    with torch.no_grad():
        for i, tok in enumerate(want):
            logits = model(torch.tensor([seq])).logits[0, -1].float()
            logp = torch.log_softmax(logits, -1)
            got = int(torch.argmax(logits))
            if got != tok:
                print(f"FAIL: step {i}: transformers greedy {got}, vela {tok}")
                return 1
            worst = max(worst, abs(float(logp[tok]) - gen["top_logprobs"][i][0]["logprob"]))
            seq.append(tok)
    print(f"transformers loads {ckpt}: {len(want)} greedy tokens identical to vela, "
          f"max |logprob diff| {worst:.2e}")
    return 0 if worst < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
