#!/usr/bin/env python3
"""Makes the golden gradient fixtures vela's training tests compare against (run where torch +
transformers are installed; CPU is enough, a GPU is not needed).

For each fixture model of tests/fixtures/models/ listed in MODELS, on one fixed small batch:
  tests/fixtures/grads/<model>.safetensors
      ids, targets, doc_ids, positions   [2, 16] i32   the TrainBatch (row 1 packs 3 documents;
                                                       targets -100 on "prompt" tokens and at the
                                                       end of every document)
      loss                               [1] f32       mean CE over the target tokens
      grad.<HF parameter name>           f32           d loss / d parameter, HF (split) names
  with __metadata__ {model, label_smoothing, n_target_tokens, loss_f64, transformers, torch}.

The reference is computed in float64 (model.double()), so its own rounding is far below vela's
f32 error. Packed documents are made exact by running every document as its own sequence
(positions restart at 0, no attention across documents) and summing the per-token losses; vela
runs the packed row with doc_ids. Label smoothing follows torch's cross_entropy.

Self-checks (the script fails loudly instead of writing a bad fixture): every parameter has a
finite gradient, no gradient is all zero, the packed-document loss of row 1 equals the loss of the
same documents run through a 4-D block-diagonal causal mask (a second, independent reference;
reported as a WARNING when it differs), the file reads back identically. It prints what it wrote.

usage: python3 tools/make_grad_fixtures.py [--models DIR] [--out DIR]
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file

# model -> label smoothing used for its fixture
MODELS = {
    "llama_gqa": 0.0,
    "qwen2_bias_tied": 0.1,   # q/k/v biases, tied embeddings, label smoothing
    "qwen3_qknorm": 0.0,      # QK-norm, explicit head_dim
}
BATCH, SEQ = 2, 16
DOC_LENGTHS_ROW1 = [5, 7, 4]
PROMPT_LEN_ROW0 = 4   # targets of the first tokens of row 0 are masked (SFT-like)
IGNORE = -100


def make_batch(vocab):
    g = torch.Generator().manual_seed(4321)
    ids = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
    doc_ids = torch.zeros(BATCH, SEQ, dtype=torch.long)
    positions = torch.zeros(BATCH, SEQ, dtype=torch.long)
    targets = torch.full((BATCH, SEQ), IGNORE, dtype=torch.long)
    # Row 0: one document; next-token targets, prompt masked, last position has no target.
    positions[0] = torch.arange(SEQ)
    targets[0, :-1] = ids[0, 1:]
    targets[0, :PROMPT_LEN_ROW0] = IGNORE
    # Row 1: packed documents.
    start = 0
    for d, n in enumerate(DOC_LENGTHS_ROW1):
        doc_ids[1, start:start + n] = d
        positions[1, start:start + n] = torch.arange(n)
        targets[1, start:start + n - 1] = ids[1, start + 1:start + n]
        start += n
    assert start == SEQ
    return ids, targets, doc_ids, positions


def documents(ids, targets, doc_ids):
    """(ids [1, L], targets [1, L]) of every document of the batch."""
    out = []
    for b in range(ids.shape[0]):
        row = doc_ids[b]
        start = 0
        while start < ids.shape[1]:
            end = start
            while end < ids.shape[1] and row[end] == row[start]:
                end += 1
            out.append((ids[b:b + 1, start:end], targets[b:b + 1, start:end]))
            start = end
    return out


def loss_sum(logits, targets, smoothing):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=IGNORE, reduction="sum", label_smoothing=smoothing)


def masked_row_loss(model, ids, targets, doc_ids, positions, smoothing):
    """Independent reference for one packed row: a 4-D additive mask (causal and same document)."""
    T = ids.shape[1]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    same_doc = doc_ids[0][:, None] == doc_ids[0][None, :]
    allowed = causal & same_doc
    mask = torch.zeros(1, 1, T, T, dtype=torch.float64)
    mask.masked_fill_(~allowed, torch.finfo(torch.float64).min)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    return loss_sum(logits, targets, smoothing)


def load_model(path):
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64,
                                                                  attn_implementation="eager")
    except TypeError:  # transformers 4.x
        model = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float64,
                                                                  attn_implementation="eager")
    return model.double().eval()  # eval: no dropout; gradients still flow


def make_fixture(name, smoothing, models_dir, out_dir):
    path = os.path.join(models_dir, name)
    model = load_model(path)
    vocab = model.config.vocab_size
    ids, targets, doc_ids, positions = make_batch(vocab)
    n_targets = int((targets != IGNORE).sum())
    model.zero_grad(set_to_none=True)
    total = torch.zeros((), dtype=torch.float64)
    for doc_ids_, doc_targets in documents(ids, targets, doc_ids):
        logits = model(input_ids=doc_ids_).logits  # positions 0..L-1, causal, one document
        total = total + loss_sum(logits, doc_targets, smoothing)
    loss = total / n_targets
    loss.backward()

    # Cross-check against the 4-D mask reference on the packed row. The per-document reference is
    # exact by construction; a mismatch here more likely means this transformers version reads
    # custom 4-D masks differently, so it is reported, not fatal.
    with torch.no_grad():
        per_doc = sum(float(loss_sum(model(input_ids=d).logits, t, smoothing))
                      for d, t in documents(ids[1:], targets[1:], doc_ids[1:]))
        try:
            masked = float(masked_row_loss(model, ids[1:], targets[1:], doc_ids[1:],
                                           positions[1:], smoothing))
            mask_check = "ok" if math.isclose(per_doc, masked, rel_tol=1e-9, abs_tol=1e-9) else \
                f"MISMATCH ({masked!r})"
        except Exception as e:  # noqa: BLE001 - report and go on
            mask_check = f"not run ({type(e).__name__}: {e})"
    if not mask_check == "ok":
        print(f"WARNING {name}: packed row per document {per_doc!r}, 4-D mask check {mask_check}")

    tensors = {
        "ids": ids.to(torch.int32).contiguous(),
        "targets": targets.to(torch.int32).contiguous(),
        "doc_ids": doc_ids.to(torch.int32).contiguous(),
        "positions": positions.to(torch.int32).contiguous(),
        "loss": loss.detach().float().reshape(1),
    }
    for pname, p in model.named_parameters():  # tied weights appear once (embed_tokens)
        if p.grad is None:
            sys.exit(f"{name}: parameter {pname} got no gradient")
        g = p.grad.detach()
        if not torch.isfinite(g).all():
            sys.exit(f"{name}: gradient of {pname} is not finite")
        if float(g.abs().max()) == 0.0:
            sys.exit(f"{name}: gradient of {pname} is all zero")
        tensors["grad." + pname] = g.float().contiguous()
    metadata = {"model": name, "label_smoothing": repr(smoothing), "n_target_tokens": str(n_targets),
                "loss_f64": repr(float(loss)), "transformers": transformers.__version__,
                "torch": torch.__version__}
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, name + ".safetensors")
    save_file(tensors, out, metadata=metadata)
    back = load_file(out)
    for k, v in tensors.items():
        if not torch.equal(back[k], v):
            sys.exit(f"{name}: {k} did not read back identically from {out}")
    n_grads = sum(1 for k in tensors if k.startswith("grad."))
    print(f"{name}: wrote {out} ({os.path.getsize(out)} bytes): loss {float(loss):.6f} over "
          f"{n_targets} target tokens, label_smoothing {smoothing}, {n_grads} parameter gradients, "
          f"4-D mask cross-check {mask_check}")
    for k, v in tensors.items():
        if k.startswith("grad."):
            print(f"  {k:60s} {list(v.shape)}  max|g| {float(v.abs().max()):.3e}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.join(here, "..", "tests", "fixtures", "models"))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "grads"))
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    for name, smoothing in MODELS.items():
        make_fixture(name, smoothing, args.models, args.out)


if __name__ == "__main__":
    main()
