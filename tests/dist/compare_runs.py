#!/usr/bin/env python3
"""Compares two vela training runs (tests/dist/test_dist_train.sh): the per-step losses of their
metrics.jsonl and every f32 tensor of a checkpoint's model.safetensors, with no third-party
package (a safetensors file is an 8-byte header length, a JSON header, then raw little-endian data).

usage: compare_runs.py RUN_A RUN_B STEP (exact | TOL_LOSS TOL_WEIGHT)
Prints the largest relative loss difference and absolute weight difference; exits 1 when "exact"
and any bit differs, or when a difference is above its tolerance."""
import json, os, struct, sys
from array import array


def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        a, b = e["data_offsets"]
        out[name] = data[8 + n + a:8 + n + b]
    return out


def losses(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    return {r["step"]: r["loss"] for r in recs if "loss" in r and "step" in r}


def main():
    a, b, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
    exact = sys.argv[4] == "exact"
    tol_loss = 0.0 if exact else float(sys.argv[4])
    tol_w = 0.0 if exact else float(sys.argv[5])
    la, lb = losses(a), losses(b)
    common = sorted(set(la) & set(lb))
    assert common, f"no common steps in {a} and {b}"
    loss_diff = max(abs(la[s] - lb[s]) / max(abs(la[s]), 1e-12) for s in common)
    loss_bits = all(la[s] == lb[s] for s in common)
    ck = "step-%08d" % step
    ta = tensors(os.path.join(a, ck, "model.safetensors"))
    tb = tensors(os.path.join(b, ck, "model.safetensors"))
    assert ta.keys() == tb.keys(), "different tensor names"
    w_diff, w_bits = 0.0, True
    for name in ta:
        if ta[name] != tb[name]:
            w_bits = False
            xa, xb = array("f"), array("f")
            xa.frombytes(ta[name])
            xb.frombytes(tb[name])
            w_diff = max(w_diff, max(abs(p - q) for p, q in zip(xa, xb)))
    print(f"{os.path.basename(a)} vs {os.path.basename(b)}: steps {common[0]}..{common[-1]}, "
          f"max rel loss diff {loss_diff:.3g}{' (bit-identical)' if loss_bits else ''}, "
          f"max abs weight diff {w_diff:.3g}{' (bit-identical)' if w_bits else ''}")
    if exact:
        ok = loss_bits and w_bits
    else:
        ok = loss_diff <= tol_loss and w_diff <= tol_w
    sys.exit(0 if ok else 1)


main()
