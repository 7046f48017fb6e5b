#!/usr/bin/env python3
"""Checks that a checkpoint written by `vela train` loads in transformers and agrees with vela:
greedy continuation of a prompt and the log-probabilities vela reported for it.
Run on the GPU machine (torch + transformers).
usage: python3 tools/check_trained_checkpoint.py CHECKPOINT_DIR VELA_GENERATE_JSON PROMPT_IDS
  VELA_GENERATE_JSON: the output of `vela generate --model CHECKPOINT_DIR --prompt-ids PROMPT_IDS
  --max-tokens N --temperature 0 --ignore-eos --json --top-logprobs K` (f32, CPU; any K >= 1:
  every reported candidate of every step is compared, not only the chosen token).
Works for every architecture transformers knows (dense llama / qwen2 / qwen3 / mistral and the
MoE qwen3_moe / mixtral / qwen2_moe: tools/check_moe_checkpoints.sh).
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
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        ckpt, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    model.eval()
    # A tensor transformers did not find is randomly initialised (only a warning): fail instead.
    tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
    bad = {k: sorted(set(v) - tied if k == "missing_keys" else v)
           for k, v in info.items() if k != "error_msgs"}
    bad = {k: v for k, v in bad.items() if v}
    if bad or info.get("error_msgs"):
        print(f"FAIL: {ckpt} does not load cleanly: {bad} {info.get('error_msgs') or ''}")
        return 1
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
            for cand in gen["top_logprobs"][i]:
                worst = max(worst, abs(float(logp[cand["id"]]) - cand["logprob"]))
            seq.append(tok)
    k = len(gen["top_logprobs"][0]) if want else 0
    print(f"transformers loads {ckpt} ({type(model).__name__}): {len(want)} greedy tokens "
          f"identical to vela, max |logprob diff| {worst:.2e} over the top-{k} of each step")
    return 0 if worst < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
