#!/usr/bin/env python3
"""One steady decode step as the GPU ran it, from tools/cupti_trace's kernel CSV.

usage: kernel_trace_step.py trace.csv [n_steps]
The CSV holds every kernel's GPU start / end (CUPTI activity records); kernels of one CUDA graph
launch share a correlation id. The script takes the last n_steps (default 64) graph launches with
the graph launched most often in the later half of the trace (trace one case at a time, so that
is the timed case's bucket) and prints the step period, the graph's GPU span, each kernel's
total over a step (its duration, and duration plus its start after the previous kernel's end:
the time the chain spends on it), and every kernel position of a step with its median duration
and its start after the previous kernel's end (< 0: overlap under programmatic dependent launch).
"""
import csv
import re
import statistics
import subprocess
import sys
from collections import Counter, defaultdict


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                             check=True).stdout.splitlines()
        return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def short(name, n=80):
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"vela::ops::cuda::(\(anonymous namespace\)::)?", "", name)
    return name[:n]


def main():
    path = sys.argv[1]
    n_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    rows = list(csv.DictReader(open(path)))
    names = demangle(sorted({r["name"] for r in rows}))
    by_corr = defaultdict(list)
    graph_of = {}
    for r in rows:
        if int(r["graph_id"]) == 0:
            continue
        by_corr[int(r["correlation"])].append(
            (int(r["start_ns"]), int(r["end_ns"]), short(names[r["name"]]),
             f'{r["grid_x"]}x{r["grid_y"]}x{r["grid_z"]}'))
        graph_of[int(r["correlation"])] = int(r["graph_id"])
    if not by_corr:
        print("no graph-launched kernels in the trace")
        return
    order = sorted(by_corr, key=lambda c: min(k[0] for k in by_corr[c]))
    for c in order:
        by_corr[c].sort()
    graph = Counter(graph_of[c] for c in order[len(order) // 2:]).most_common(1)[0][0]
    steps = [c for c in order if graph_of[c] == graph][-n_steps:]
    n_kernels = len(by_corr[steps[-1]])
    print(f"{len(order)} graph launches; the last {len(steps)} of graph {graph} ({n_kernels} kernels)")
    med = lambda v: statistics.median(v) / 1000.0 if v else 0.0
    spans = [by_corr[c][-1][1] - by_corr[c][0][0] for c in steps]
    busy = [sum(e - s for s, e, _, _ in by_corr[c]) for c in steps]
    periods = [by_corr[b][0][0] - by_corr[a][0][0] for a, b in zip(steps, steps[1:])]
    print(f"step period {med(periods):8.1f} us   graph span {med(spans):8.1f} us   "
          f"kernels busy (summed) {med(busy):8.1f} us")
    per_pos = [[] for _ in range(n_kernels)]
    per_gap = [[] for _ in range(n_kernels)]
    for c in steps:
        prev = None
        for i, (s, e, _, _) in enumerate(by_corr[c]):
            per_pos[i].append(e - s)
            if prev is not None:
                per_gap[i].append(s - prev)
            prev = e
    last = by_corr[steps[-1]]
    # Marginal time of a kernel in the chain: from the previous kernel's end to its own end.
    per_name = defaultdict(lambda: [0.0, 0.0, 0])
    for i, (_, _, name, grid) in enumerate(last):
        d, g = med(per_pos[i]), med(per_gap[i]) if i else 0.0
        per_name[(name, grid)][0] += d
        per_name[(name, grid)][1] += d + g
        per_name[(name, grid)][2] += 1
    # What runs between two timed graphs (kernels, copies and memsets launched outside them), in
    # order, with its start after the earlier graph's end (median over the steps; each step's
    # items matched by position, so steps with another count of items are left out).
    flat = sorted((int(r["start_ns"]), int(r["end_ns"]), short(names[r["name"]]))
                  for r in rows if int(r["graph_id"]) == 0)
    between = []
    for a, b in zip(steps, steps[1:]):
        end_a, start_b = by_corr[a][-1][1], by_corr[b][0][0]
        between.append([(s - end_a, e - s, n) for s, e, n in flat if end_a <= s < start_b])
    if between:
        common = Counter(len(x) for x in between).most_common(1)[0][0]
        same = [x for x in between if len(x) == common]
        gaps = [by_corr[b][0][0] - by_corr[a][-1][1] for a, b in zip(steps, steps[1:])]
        print(f"\nbetween two graphs: {med(gaps):.1f} us from one graph's end to the next one's start; "
              f"{common} items in {len(same)} of {len(between)} gaps:")
        for i in range(common):
            print(f"  +{med([x[i][0] for x in same]):7.2f} us  {med([x[i][1] for x in same]):7.2f} us  "
                  f"{same[-1][i][2]}")
    print("\nby kernel (summed over the step: duration, end-to-end share = duration + start after the")
    print("previous kernel's end, launches):")
    for (name, grid), (d, m, cnt) in sorted(per_name.items(), key=lambda x: -x[1][1]):
        print(f"  {d:8.1f} us  {m:8.1f} us  x{cnt:3d}  {grid:>12}  {name}")
    print("\nby position (median us, start after the previous end), first 30 and last 8:")
    for i in list(range(min(30, n_kernels))) + list(range(max(30, n_kernels - 8), n_kernels)):
        gap = med(per_gap[i]) if i else 0.0
        print(f"  {i:4d} {med(per_pos[i]):8.2f} us  {gap:+7.2f} us  {last[i][3]:>12}  {last[i][2]}")


if __name__ == "__main__":
    main()
