#!/usr/bin/env python3
"""Makes the golden for `vela eval ppl` (tests/eval/test_ppl_golden.cpp): the sliding-window
perplexity of two fixture models (tests/fixtures/models, made by tools/make_model_fixtures.py) on a
small committed text, computed with transformers.

Writes into tests/fixtures/eval/:
  tokenizer.json   a byte-level BPE tokenizer for the fixtures' 128-token vocabulary: id i is byte i
                   (ASCII only, no merges; ids 1 and 2 are the special tokens <s> and </s>), so the
                   token ids of a text are its bytes and no tokenizer library is needed here
  ppl_docs.jsonl   the evaluated documents ({"text": ...}), committed with the golden
  ppl_golden.json  per model, per (max_length, stride) and per document: the number of tokens, the
                   scored tokens and the summed negative log-likelihood (nats), plus the totals
                   (perplexity, bits per byte)

Sliding-window semantics (Hugging Face "Perplexity of fixed-length models", lm-evaluation-harness's
rolling log-likelihood with a context window): windows start every `stride` tokens and span at most
`max_length`; a window scores only the tokens the previous window did not reach (the last
end - prev_end of it), each conditioned on everything before it inside the window. The first token
of a document has no context and is never scored, so a document of n tokens scores n - 1. (The HF
guide's `num_valid_tokens - batch_size` count is one short for every window after the first; the
sums here are taken token by token, which is what the guide means.)

usage: python3 tools/make_eval_fixtures.py [--tokenizer-only]   (torch + transformers for the golden)
"""
import argparse
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures", "eval")
MODELS = ["llama_gqa", "qwen2_bias_tied"]
SETTINGS = [(64, 32), (64, 64), (40, 13), (16, 1)]
DOCS = [
    # Jane Austen, Pride and Prejudice (1813), chapter 1: public domain.
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife. However little known the feelings or views of such a man may be "
    "on his first entering a neighbourhood, this truth is so well fixed in the minds of the "
    "surrounding families, that he is considered as the rightful property of some one or other "
    "of their daughters.",
    "\"My dear Mr. Bennet,\" said his lady to him one day, \"have you heard that Netherfield Park "
    "is let at last?\"",
    "Mr. Bennet replied that he had not.",
]


def bytes_to_unicode():
    """The GPT-2 byte-level alphabet: printable bytes stand for themselves, the others are shifted
    to 256 + n in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


def tokenizer_json():
    b2u = bytes_to_unicode()
    vocab = {b2u[i]: i for i in range(128)}
    specials = {1: "<s>", 2: "</s>"}
    for i, s in specials.items():
        del vocab[b2u[i]]
        vocab[s] = i
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, s in specials.items()],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": None,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab, "merges": []},
    }


def window_nll(model, ids, max_length, stride):
    """(summed NLL in nats, number of scored tokens) of one document."""
    import torch
    nll, n_scored, prev_end = 0.0, 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + max_length, len(ids))
        trg_len = end - prev_end
        window = torch.tensor([ids[begin:end]])
        with torch.no_grad():
            logits = model(window).logits[0].double()  # [L, V]
        logp = torch.log_softmax(logits, dim=-1)
        first = max(1, (end - begin) - trg_len)  # window index of the first scored token
        for j in range(first, end - begin):
            nll -= logp[j - 1, ids[begin + j]].item()
            n_scored += 1
        prev_end = end
        if end == len(ids):
            break
    return nll, n_scored


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer-only", action="store_true")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f, ensure_ascii=False, indent=1)
    with open(os.path.join(OUT, "ppl_docs.jsonl"), "w") as f:
        for d in DOCS:
            f.write(json.dumps({"text": d}) + "\n")
    if args.tokenizer_only:
        return
    import torch
    import transformers
    torch.manual_seed(0)
    golden = {"transformers": transformers.__version__, "torch": torch.__version__,
              "docs": "ppl_docs.jsonl", "models": {}}
    for name in MODELS:
        path = os.path.join(HERE, "..", "tests", "fixtures", "models", name)
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.eval()
        per_setting = []
        for max_length, stride in SETTINGS:
            docs, total_nll, total_scored, total_bytes = [], 0.0, 0, 0
            for d in DOCS:
                ids = list(d.encode("utf-8"))
                nll, n = window_nll(model, ids, max_length, stride)
                docs.append({"n_tokens": len(ids), "n_scored": n, "nll": nll})
                total_nll += nll
                total_scored += n
                total_bytes += len(d.encode("utf-8"))
            per_setting.append({
                "max_length": max_length, "stride": stride, "docs": docs, "nll": total_nll,
                "n_scored": total_scored, "n_bytes": total_bytes,
                "perplexity": math.exp(total_nll / total_scored),
                "bits_per_byte": total_nll / (math.log(2) * total_bytes)})
            print(name, max_length, stride, per_setting[-1]["perplexity"])
        golden["models"][name] = per_setting
    with open(os.path.join(OUT, "ppl_golden.json"), "w") as f:
        json.dump(golden, f, indent=1)


if __name__ == "__main__":
    main()
