#!/usr/bin/env python3
"""Turns the BPE vocabulary `vela tokenize train` wrote into a chat model's tokenizer directory
(scripts/demo_data.sh runs it; stdlib only): tokenizer_config.json gets the ChatML template and
the special tokens, special_tokens_map.json and generation_config.json are written next to it,
and the model's config.json (--model-config IN OUT) gets the eos / bos / pad ids.

  <|endoftext|>  id 0   ends a pretraining document (eos of the text shards), padding
  <|im_start|>   id 1   opens a turn:  <|im_start|>{role}\\n{content}<|im_end|>\\n
  <|im_end|>     id 2   closes a turn; the chat eos (generation stops on it)

`vela train` copies these files into every checkpoint, so each step-N/ is a chat model directory.
"""
import argparse
import json
import os

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokenizer_dir")
    ap.add_argument("--model-config", nargs=2, metavar=("IN", "OUT"),
                    help="copy a model config.json, adding the special token ids")
    args = ap.parse_args()
    d = args.tokenizer_dir
    tok = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    ids = {t["content"]: t["id"] for t in tok.get("added_tokens", [])}
    missing = [s for s in SPECIALS if s not in ids]
    if missing:
        raise SystemExit(f"[demo-tokenizer] {d}/tokenizer.json lacks the special tokens {missing} "
                         "(train it with --special \"<|endoftext|>,<|im_start|>,<|im_end|>\")")
    eos, pad, start = ids["<|im_end|>"], ids["<|endoftext|>"], ids["<|im_start|>"]
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1024,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "added_tokens_decoder": {str(ids[s]): {"content": s, "lstrip": False, "normalized": False,
                                                "rstrip": False, "single_word": False, "special": True}
                                 for s in SPECIALS},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(d, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        json.dump({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}, f, indent=2)
        f.write("\n")
    gen = {"eos_token_id": [eos, pad], "pad_token_id": pad, "do_sample": False,
           "max_new_tokens": 256, "temperature": 1.0, "top_p": 1.0}
    with open(os.path.join(d, "generation_config.json"), "w", encoding="utf-8") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    if args.model_config:
        src, dst = args.model_config
        mc = json.load(open(src, encoding="utf-8"))
        mc.update({"eos_token_id": [eos, pad], "pad_token_id": pad, "vocab_size": len(tok["model"]["vocab"])})
        mc.pop("bos_token_id", None)
        with open(dst, "w", encoding="utf-8") as f:
            json.dump(mc, f, indent=2)
            f.write("\n")
    print(f"[demo-tokenizer] {d}: chat template, eos <|im_end|> ({eos}), pad <|endoftext|> ({pad}), "
          f"<|im_start|> ({start})")


if __name__ == "__main__":
    main()
