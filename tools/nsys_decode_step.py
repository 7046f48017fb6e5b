#!/usr/bin/env python3
"""Where one steady decode step's time goes, from an nsys profile of `vela bench engine`.

usage: nsys profile -t cuda --cuda-graph-trace=node -o prof vela bench engine --cases batch64 ...
       nsys export --type sqlite -o prof.sqlite prof.nsys-rep
       tools/nsys_decode_step.py prof.sqlite [n_steps]

A decode step replays one CUDA graph (cudaGraphLaunch); its kernels carry the launch's correlation
id. The script takes the last n_steps (default 64) replays of the most common kernel count (the
timed batch's bucket) and prints: the period between replays, the graph's GPU span, the GPU idle
time between replays and the work in it (non-graph kernels such as sampling, copies), the graph's
kernels by position (one step in launch order, averaged over the steps) and by name.
"""
import re
import sqlite3
import statistics
import sys
from collections import Counter, defaultdict


def columns(db, table):
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def short(name, n=90):
    name = re.sub(r"\(.*", "", name) if len(name) > n else name
    return name[:n]


def main():
    path = sys.argv[1]
    n_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    db = sqlite3.connect(path)
    strings = dict(db.execute("SELECT id, value FROM StringIds"))
    kcols = columns(db, "CUPTI_ACTIVITY_KIND_KERNEL")
    name_col = "demangledName" if "demangledName" in kcols else "shortName"
    kernels = db.execute(
        f"SELECT start, end, correlationId, {name_col} FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start"
    ).fetchall()
    rt = db.execute("SELECT start, end, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
    launches = {c: (s, e) for s, e, c, n in rt if strings.get(n, "").startswith("cudaGraphLaunch")}
    by_launch = defaultdict(list)
    other = []
    for s, e, c, n in kernels:
        (by_launch[c] if c in launches else other).append((s, e, strings.get(n, str(n))))
    if not by_launch:
        print("no graph-launched kernels (profile with --cuda-graph-trace=node and CUDA graphs on)")
        return
    order = sorted(by_launch, key=lambda c: by_launch[c][0][0])
    counts = Counter(len(by_launch[c]) for c in order[len(order) // 2:])
    n_kernels = counts.most_common(1)[0][0]
    steps = [c for c in order if len(by_launch[c]) == n_kernels][-n_steps:]
    print(f"{len(order)} graph replays; taking the last {len(steps)} with {n_kernels} kernels each")
    spans, periods, gaps, busy = [], [], [], []
    for i, c in enumerate(steps):
        ks = by_launch[c]
        spans.append(ks[-1][1] - ks[0][0])
        busy.append(sum(e - s for s, e, _ in ks))
        if i + 1 < len(steps):
            nxt = by_launch[steps[i + 1]]
            periods.append(nxt[0][0] - ks[0][0])
            gaps.append(nxt[0][0] - ks[-1][1])
    med = lambda v: statistics.median(v) / 1000.0 if v else 0.0
    print(f"step period (replay start to next)  {med(periods):8.1f} us")
    print(f"graph span on the GPU               {med(spans):8.1f} us (kernels busy {med(busy):.1f} us)")
    print(f"between graphs (GPU idle or other)  {med(gaps):8.1f} us")
    # Work between consecutive timed replays: non-graph kernels and memcpys.
    t0, t1 = by_launch[steps[0]][0][0], by_launch[steps[-1]][-1][1]
    n_between = max(len(steps) - 1, 1)
    between = defaultdict(lambda: [0, 0])
    for s, e, n in other:
        if t0 <= s <= t1:
            between[short(n)][0] += e - s
            between[short(n)][1] += 1
    mcols = columns(db, "CUPTI_ACTIVITY_KIND_MEMCPY") if db.execute(
        "SELECT name FROM sqlite_master WHERE name='CUPTI_ACTIVITY_KIND_MEMCPY'").fetchone() else set()
    if mcols:
        kinds = {1: "memcpy HtoD", 2: "memcpy DtoH", 8: "memcpy DtoD"}
        for s, e, k, b in db.execute("SELECT start, end, copyKind, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY"):
            if t0 <= s <= t1:
                between[kinds.get(k, f"memcpy kind {k}")][0] += e - s
                between[kinds.get(k, f"memcpy kind {k}")][1] += 1
    print("\noutside the graph, per step (GPU time, count):")
    for n, (t, cnt) in sorted(between.items(), key=lambda x: -x[1][0]):
        print(f"  {t / n_between / 1000:8.2f} us  x{cnt / n_between:5.1f}  {n}")
    # Host side of a step: runtime calls on the scheduler thread between replays.
    print("\nCUDA API calls per step (host time, count):")
    api = defaultdict(lambda: [0, 0])
    for s, e, c, n in rt:
        if t0 <= s <= t1:
            api[strings.get(n, str(n))][0] += e - s
            api[strings.get(n, str(n))][1] += 1
    for n, (t, cnt) in sorted(api.items(), key=lambda x: -x[1][0])[:10]:
        print(f"  {t / n_between / 1000:8.2f} us  x{cnt / n_between:5.1f}  {n}")
    # The graph by kernel name and by position.
    per_name = defaultdict(list)
    per_pos = [[] for _ in range(n_kernels)]
    per_gap = [[] for _ in range(n_kernels)]  # start minus the previous kernel's end (< 0: overlap)
    for c in steps:
        acc = defaultdict(int)
        prev_end = None
        for i, (s, e, n) in enumerate(by_launch[c]):
            per_pos[i].append(e - s)
            if prev_end is not None:
                per_gap[i].append(s - prev_end)
            prev_end = e
            acc[short(n)] += e - s
        for n, t in acc.items():
            per_name[n].append(t)
    names = [short(n) for _, _, n in by_launch[steps[-1]]]
    cnt = Counter(names)
    print("\ngraph kernels by name (us per step, launches per step, share of busy):")
    total = med(busy)
    for n, ts in sorted(per_name.items(), key=lambda x: -statistics.median(x[1])):
        print(f"  {med(ts):8.1f} us  x{cnt[n]:4d}  {100 * med(ts) / total:5.1f}%  {n}")
    print("\ngraph kernels by position (median us; start after the previous kernel's end, < 0 =")
    print("overlap under programmatic dependent launch); first 40 and last 6:")
    for i in list(range(min(40, n_kernels))) + list(range(max(40, n_kernels - 6), n_kernels)):
        print(f"  {i:4d} {med(per_pos[i]):8.2f} us  {med(per_gap[i]):+7.2f} us  {names[i]}")


if __name__ == "__main__":
    main()
