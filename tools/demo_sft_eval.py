#!/usr/bin/env python3
"""Scores the demo model on the held-out SFT questions (tools/demo_data.py's sft_valid.jsonl):
greedy answers from `vela generate --batch` with the prompt rendered by the model's ChatML
template, scored by exact match (whitespace-normalised) per task, and by the first word alone
(for `define`: the headword). Stdlib only.

  tools/demo_sft_eval.py --vela build/vela --model models/vela-demo --data sft_valid.jsonl \
      [--limit-per-task N] [--device cpu|cuda] [--json results.json] [--show 3]

Prints a table (task, n, exact-match accuracy) and, with --json, writes the numbers and every
answer. The same questions through `vela eval generate` (exact match) give the same scores; this
script exists so the numbers can be made before that command does.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

MAX_TOKENS = {"book": 8, "novel": 8, "define": 128, "define_seen": 128, "jargon": 128}


def norm(s):
    return " ".join(s.split())


def chatml(messages):
    # The chat template of models/vela-demo/tokenizer_config.json, with add_generation_prompt.
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + \
        "<|im_start|>assistant\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vela", default="build/vela")
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--limit-per-task", type=int, default=0, help="first N questions of each task (0 = all)")
    ap.add_argument("--tasks", default="book,novel,define,define_seen,jargon")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--json", default="")
    ap.add_argument("--show", type=int, default=0, help="print N answers per task")
    args = ap.parse_args()
    tasks = args.tasks.split(",")
    items, per_task = [], collections.Counter()
    for line_no, line in enumerate(open(args.data, encoding="utf-8"), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        for key in ("task", "messages", "answer"):
            if key not in r:
                raise SystemExit(f"{args.data}:{line_no}: record has no '{key}'")
        if r["task"] not in tasks or (args.limit_per_task and per_task[r["task"]] >= args.limit_per_task):
            continue
        per_task[r["task"]] += 1
        items.append(r)
    if not items:
        raise SystemExit(f"{args.data}: no questions for tasks {tasks}")
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for r in items:
            prompt = [m for m in r["messages"] if m["role"] != "assistant"]
            f.write(json.dumps({"prompt": chatml(prompt), "max_tokens": MAX_TOKENS.get(r["task"], 64),
                                "temperature": 0.0}, ensure_ascii=False) + "\n")
        batch = f.name
    try:
        out = subprocess.run([args.vela, "generate", "--model", args.model, "--batch", batch,
                              "--device", args.device, "--dtype", args.dtype],
                             check=True, capture_output=True, text=True).stdout
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"vela generate failed ({e.returncode}): {e.stderr.strip()[-2000:]}")
    finally:
        os.unlink(batch)
    results = [json.loads(l) for l in out.splitlines() if l.strip()]
    if len(results) != len(items):
        raise SystemExit(f"vela generate returned {len(results)} results for {len(items)} prompts")
    score = collections.defaultdict(lambda: [0, 0])
    first = collections.Counter()  # the answer's first word right (the headword, for define)
    answers = []
    for r, res in zip(items, results):
        text = res.get("text", res.get("choices", [{}])[0].get("text", ""))
        ok = norm(text) == norm(r["answer"])
        first[r["task"]] += (text.split()[:1] == r["answer"].split()[:1])
        score[r["task"]][0] += ok
        score[r["task"]][1] += 1
        answers.append({"task": r["task"], "question": r["messages"][-2]["content"], "expected": r["answer"],
                        "got": text, "correct": ok})
    total = [sum(v[0] for v in score.values()), sum(v[1] for v in score.values())]
    print(f"{'task':<12} {'n':>5} {'exact':>7} {'1st word':>9}")
    for t in tasks:
        if t in score:
            c, n = score[t]
            print(f"{t:<12} {n:>5} {c / n:>7.1%} {first[t] / n:>9.1%}")
    print(f"{'all':<12} {total[1]:>5} {total[0] / total[1]:>7.1%}")
    for t in tasks:
        for a in [a for a in answers if a["task"] == t][:args.show]:
            print(f"--- {t}: {a['question'][:100]!r}\n    expected {a['expected'][:100]!r}\n    got      {a['got'][:100]!r}")
    if args.json:
        json.dump({"model": args.model, "data": args.data,
                   "tasks": {t: {"n": n, "correct": c, "exact_match": c / n, "first_word": first[t] / n}
                             for t, (c, n) in score.items()},
                   "answers": answers}, open(args.json, "w"), indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
