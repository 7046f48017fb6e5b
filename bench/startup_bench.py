#!/usr/bin/env python3
"""Process start -> first token of `vela generate` and `vela serve` (issue 16 item 6).

generate: wall time from spawning the process to its exit after N tokens, and the first-token
instant the process logs itself (VELA_LOG_LEVEL=debug: "[startup] first token sampled T ms after
process start"), with every [startup] phase line of the first run printed.
serve: from spawning `vela serve` to /health answering, to the first streamed token of a
completion sent as soon as it does, and to its N-th token (client side).
The checkpoint is read once first so it sits in the page cache (the target's condition).

  python3 bench/startup_bench.py --vela build/vela --model DIR [--device cuda --dtype bf16]
      [--runs 3] [--tokens 16] [--port 8123] [--out results.json]
"""
import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import time


def warm_page_cache(model):
    n = 0
    for name in os.listdir(model):
        p = os.path.join(model, name)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                while chunk := f.read(64 << 20):
                    n += len(chunk)
    return n


def run_generate(args, env):
    cmd = [args.vela, "generate", "--model", args.model, "--prompt", "Hello, my name is",
           "--max-tokens", str(args.tokens), "--ignore-eos", "--device", args.device, "--dtype", args.dtype]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = (time.monotonic() - t0) * 1e3
    if p.returncode != 0:
        raise SystemExit(f"generate failed ({p.returncode}): {p.stderr[-2000:]}")
    m = re.search(r"first token sampled (\d+) ms after process start", p.stderr)
    first = float(m.group(1)) if m else None
    phases = [l for l in p.stderr.splitlines() if "[startup]" in l or "[engine]" in l or "[weights]" in l]
    return wall, first, phases


def wait_health(port, deadline):
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return True
        except (ConnectionRefusedError, socket.timeout, OSError, http.client.HTTPException):
            pass
        time.sleep(0.005)
    return False


def run_serve(args, env):
    cmd = [args.vela, "serve", "--model", args.model, "--port", str(args.port), "--device", args.device,
           "--dtype", args.dtype, "--no-web-ui"]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if not wait_health(args.port, t0 + 120):
            raise SystemExit("vela serve did not come up in 120 s")
        ready = (time.monotonic() - t0) * 1e3
        body = json.dumps({"model": os.path.basename(os.path.normpath(args.model)),
                           "prompt": "Hello, my name is", "max_tokens": args.tokens,
                           "ignore_eos": True, "stream": True, "temperature": 0})
        c = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raise SystemExit(f"completion failed: {r.status} {r.read()[:500]}")
        first = None
        n = 0
        while line := r.readline():
            line = line.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[5:])
            if ev.get("choices") and ev["choices"][0].get("text") is not None:
                n += 1
                if first is None:
                    first = (time.monotonic() - t0) * 1e3
        last = (time.monotonic() - t0) * 1e3
        return ready, first, last, n
    finally:
        p.terminate()
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        run_serve.phases = [l for l in err.splitlines() if "[startup]" in l or "[engine]" in l or "[weights]" in l]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vela", default="build/vela")
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--port", type=int, default=8123)
    ap.add_argument("--what", default="generate,serve")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    env = dict(os.environ, VELA_LOG_LEVEL="debug")
    gb = warm_page_cache(args.model) / 1e9
    print(f"checkpoint {args.model}: {gb:.2f} GB read into the page cache; {args.device} {args.dtype}, "
          f"{args.tokens} tokens, {args.runs} runs")
    res = {"model": args.model, "device": args.device, "dtype": args.dtype, "tokens": args.tokens}
    if "generate" in args.what:
        walls, firsts = [], []
        for i in range(args.runs):
            wall, first, phases = run_generate(args, env)
            walls.append(wall)
            firsts.append(first)
            if i == 0:
                print("generate, run 1 phases:\n  " + "\n  ".join(phases))
            print(f"generate run {i + 1}: first token {first} ms after process start, "
                  f"{args.tokens} tokens + exit {wall:.0f} ms")
        res["generate"] = {"first_token_ms": firsts, "exit_ms": walls,
                           "first_token_ms_median": statistics.median([f for f in firsts if f is not None] or [0])}
    if "serve" in args.what:
        rows = []
        for i in range(args.runs):
            ready, first, last, n = run_serve(args, env)
            rows.append({"ready_ms": ready, "first_token_ms": first, "last_token_ms": last, "n_tokens": n})
            if i == 0:
                print("serve, run 1 phases:\n  " + "\n  ".join(run_serve.phases))
            print(f"serve run {i + 1}: /health {ready:.0f} ms, first token {first:.0f} ms, "
                  f"{n} tokens {last:.0f} ms after spawn")
        res["serve"] = {"runs": rows,
                        "first_token_ms_median": statistics.median(r["first_token_ms"] for r in rows)}
    print(json.dumps({k: v for k, v in res.items() if k in ("generate", "serve")}))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
