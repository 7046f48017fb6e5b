#!/usr/bin/env python3
"""Per-kernel GPU time totals from `ncu --csv --metrics gpu__time_duration.sum` output.

usage: ncu_summary.py FILE.csv TITLE [TOP] [--step REGEX]
Prints the total, then the TOP (default 20) kernels by summed time with their launch counts.
With --step, also one step kernel by kernel, in launch order: the kernels after the first launch
whose name matches REGEX up to and including the next one (e.g. 'wgmma.*float' for the LM head
of a decode step).
"""
import collections
import csv
import re
import sys

SCALE_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def print_step(seq, pattern):
    ends = [i for i, (name, _, _) in enumerate(seq) if re.search(pattern, name)]
    if len(ends) < 2:
        print(f"one step: fewer than two launches match {pattern!r}")
        return
    step = seq[ends[0] + 1:ends[1] + 1]
    print(f"one step: {len(step)} kernels, {sum(us for _, us, _ in step):.1f} us serialised")
    for name, us, grid in step:
        print(f"{us:9.2f} us  grid {grid:>14}  {name}")


def main():
    args = sys.argv[1:]
    step_re = None
    if "--step" in args:
        i = args.index("--step")
        step_re = args[i + 1]
        del args[i:i + 2]
    path, title = args[0], args[1]
    top = int(args[2]) if len(args) > 2 else 20
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    if not rows:
        print(f"{title}: no kernels in {path}")
        return
    hdr = rows[0]
    name_i, val_i, unit_i = hdr.index("Kernel Name"), hdr.index("Metric Value"), hdr.index("Metric Unit")
    grid_i = hdr.index("Grid Size") if "Grid Size" in hdr else None
    tot, cnt = collections.Counter(), collections.Counter()
    seq = []
    for r in rows[1:]:
        us = float(r[val_i].replace(",", "")) * SCALE_US.get(r[unit_i], 1.0)
        k = r[name_i].split("(")[0][:70]
        tot[k] += us
        cnt[k] += 1
        seq.append((k, us, r[grid_i] if grid_i is not None else ""))
    print(f"{title}: {sum(cnt.values())} kernels, {sum(tot.values()) / 1000:.2f} ms of GPU time")
    for k, v in tot.most_common(top):
        print(f"{v / 1000:9.3f} ms {cnt[k]:5d}x  {k}")
    if step_re:
        print_step(seq, step_re)


if __name__ == "__main__":
    main()
