#!/usr/bin/env python3
"""Writes the toy RL task of examples/dpo_toy.json and examples/grpo_toy.json (and of their LoRA
variants examples/dpo_toy_lora.json and examples/grpo_toy_lora.json).

  python3 examples/make_rl_toy_data.py OUT_DIR [--seed N]

OUT_DIR/tokenizer/  a 24-token byte-level BPE tokenizer (no merges) over the characters the task
                    uses, with a ChatML chat template (<|im_start|>role\\n...<|im_end|>\\n) and
                    <|im_end|> as EOS, so a tiny model trains on it in seconds on a CPU.
OUT_DIR/dpo.jsonl   preference records {"prompt": "3", "chosen": "4", "rejected": "7"}: the
                    chosen answer is the digit after the prompt's (9 -> 0), the rejected one any
                    other digit.
OUT_DIR/grpo.jsonl  prompt records {"input": "3", "answer": "4"} (the seeds' role mapping: input ->
                    user; no instruction, so the rendered prompt is 20 tokens and a GRPO step of
                    8 prompts x 16 samples trains on 2,688 tokens); the reward is an exact match
                    of the one-token completion with the answer.
OUT_DIR/base.jsonl  SFT records {"input": "3", "output": "3"} for the LoRA runs' base model
                    (examples/rl_toy_base.json): 60% answer the prompt's own digit, 40% a
                    uniformly random one, so the base reads the prompt and answers with a
                    digit, mostly the wrong one (the copy ~64%, each other digit ~4%). A LoRA
                    adapter cannot learn the task on a random base (docs/rl.md), so the LoRA
                    runs start from this one and must turn a mostly-copying model into one that
                    answers the next digit.
Only the standard library is used.
"""
import json
import os
import random
import sys

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHARS = "\nsystemuraint0123456789x"  # roles, the instruction "next", digits


def byte_to_unicode():
    # GPT-2's printable mapping of the 256 bytes (ByteLevel pre-tokenizer / decoder).
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_tokenizer(d):
    os.makedirs(d, exist_ok=True)
    b2u = byte_to_unicode()
    vocab = {}
    for s in SPECIALS:
        vocab[s] = len(vocab)
    for ch in dict.fromkeys(CHARS):
        vocab[b2u[ord(ch)]] = len(vocab)
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for s in SPECIALS],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": []},
    }
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    template = ("{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
                "message['content'] + '<|im_end|>\\n' }}{%- endfor %}"
                "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}")
    cfg = {"chat_template": template, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
           "bos_token": None, "tokenizer_class": "PreTrainedTokenizerFast"}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return len(vocab)


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    out = args[0]
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 0
    rng = random.Random(seed)
    n_vocab = write_tokenizer(os.path.join(out, "tokenizer"))
    with open(os.path.join(out, "dpo.jsonl"), "w") as f:
        for _ in range(160):
            d = rng.randrange(10)
            good = (d + 1) % 10
            bad = rng.choice([x for x in range(10) if x != good])
            f.write(json.dumps({"prompt": str(d), "chosen": str(good), "rejected": str(bad)}) + "\n")
    with open(os.path.join(out, "grpo.jsonl"), "w") as f:
        for i in range(80):
            d = i % 10
            f.write(json.dumps({"input": str(d), "answer": str((d + 1) % 10)}) + "\n")
    with open(os.path.join(out, "base.jsonl"), "w") as f:
        for i in range(400):
            d = i % 10
            a = d if rng.random() < 0.6 else rng.randrange(10)
            f.write(json.dumps({"input": str(d), "output": str(a)}) + "\n")
    print(f"wrote {out}: tokenizer ({n_vocab} tokens), dpo.jsonl (160), grpo.jsonl (80), "
          "base.jsonl (400)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
