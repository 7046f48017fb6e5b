#!/usr/bin/env python3
"""Per-kernel GPU time totals from `ncu --csv --metrics gpu__time_duration.sum` output.

usage: ncu_summary.py FILE.csv TITLE [TOP]
Prints the total, then the TOP (default 20) kernels by summed time with their launch counts.
"""
import collections
import csv
import sys

SCALE_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def main():
    path, title = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    if not rows:
        print(f"{title}: no kernels in {path}")
        return
    hdr = rows[0]
    name_i, val_i, unit_i = hdr.index("Kernel Name"), hdr.index("Metric Value"), hdr.index("Metric Unit")
    tot, cnt = collections.Counter(), collections.Counter()
    for r in rows[1:]:
        us = float(r[val_i].replace(",", "")) * SCALE_US.get(r[unit_i], 1.0)
        k = r[name_i].split("(")[0][:70]
        tot[k] += us
        cnt[k] += 1
    print(f"{title}: {sum(cnt.values())} kernels, {sum(tot.values()) / 1000:.2f} ms of GPU time")
    for k, v in tot.most_common(top):
        print(f"{v / 1000:9.3f} ms {cnt[k]:5d}x  {k}")


if __name__ == "__main__":
    main()
