#!/usr/bin/env python3
"""Plots training curves from `vela train` metrics.jsonl files as a PNG (stdlib only: the image
is drawn into a byte buffer and written with zlib + struct).

  tools/plot_loss.py --out loss.png pretrain=runs/demo/pretrain/metrics.jsonl SFT=runs/demo/sft/metrics.jsonl

Each run continues the x axis (global optimizer step) of the one before. Per run: the training
loss (thin line, light colour) and the validation loss (thick line with dots, dark colour).
"""
import argparse
import json
import struct
import zlib

# 5x7 glyphs, rows top to bottom, '#' = ink.
FONT_ROWS = {
    "0": "01110 10001 10011 10101 11001 10001 01110", "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111", "3": "11110 00001 00001 01110 00001 00001 11110",
    "4": "00010 00110 01010 10010 11111 00010 00010", "5": "11111 10000 11110 00001 00001 10001 01110",
    "6": "00110 01000 10000 11110 10001 10001 01110", "7": "11111 00001 00010 00100 01000 01000 01000",
    "8": "01110 10001 10001 01110 10001 10001 01110", "9": "01110 10001 10001 01111 00001 00010 01100",
    ".": "00000 00000 00000 00000 00000 01100 01100", "-": "00000 00000 00000 11111 00000 00000 00000",
    " ": "00000 00000 00000 00000 00000 00000 00000", "(": "00010 00100 01000 01000 01000 00100 00010",
    ")": "01000 00100 00010 00010 00010 00100 01000", ",": "00000 00000 00000 00000 01100 00100 01000",
    "a": "00000 00000 01110 00001 01111 10001 01111", "d": "00001 00001 01101 10011 10001 10001 01111",
    "e": "00000 00000 01110 10001 11111 10000 01110", "g": "00000 01111 10001 10001 01111 00001 01110",
    "h": "10000 10000 10110 11001 10001 10001 10001", "i": "00100 00000 01100 00100 00100 00100 01110",
    "l": "01100 00100 00100 00100 00100 00100 01110", "n": "00000 00000 10110 11001 10001 10001 10001",
    "o": "00000 00000 01110 10001 10001 10001 01110", "p": "00000 00000 11110 10001 11110 10000 10000",
    "r": "00000 00000 10110 11001 10000 10000 10000", "s": "00000 00000 01110 10000 01110 00001 11110",
    "t": "01000 01000 11100 01000 01000 01001 00110", "v": "00000 00000 10001 10001 10001 01010 00100",
    "x": "00000 00000 10001 01010 00100 01010 10001", "y": "00000 00000 10001 10001 01111 00001 01110",
    "c": "00000 00000 01110 10000 10000 10001 01110", "m": "00000 00000 11010 10101 10101 10001 10001",
    "u": "00000 00000 10001 10001 10001 10011 01101", "k": "10000 10000 10010 10100 11000 10100 10010",
    "S": "01111 10000 10000 01110 00001 00001 11110", "F": "11111 10000 10000 11110 10000 10000 10000",
    "T": "11111 00100 00100 00100 00100 00100 00100", "P": "11110 10001 10001 11110 10000 10000 10000",
}
FONT = {c: [r for r in rows.split()] for c, rows in FONT_ROWS.items()}
COLOURS = [((150, 180, 230), (20, 70, 170)), ((240, 170, 130), (190, 70, 20)),
           ((150, 210, 150), (30, 130, 40))]


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def dot(self, x, y, c, r=0):
        for dy in range(-r, r + 1):
            for dx in range(-r, r + 1):
                xx, yy = int(x) + dx, int(y) + dy
                if 0 <= xx < self.w and 0 <= yy < self.h:
                    i = (yy * self.w + xx) * 3
                    self.px[i:i + 3] = bytes(c)

    def line(self, x0, y0, x1, y1, c, r=0):
        n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for k in range(n + 1):
            t = k / n
            self.dot(x0 + (x1 - x0) * t, y0 + (y1 - y0) * t, c, r)

    def text(self, x, y, s, c=(0, 0, 0), scale=2):
        for ch in s:
            g = FONT.get(ch, FONT[" "])
            for gy, row in enumerate(g):
                for gx, bit in enumerate(row):
                    if bit == "1":
                        for sy in range(scale):
                            for sx in range(scale):
                                self.dot(x + gx * scale + sx, y + gy * scale + sy, c)
            x += 6 * scale

    def png(self, path):
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(tag, data):
            return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                    + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def nice_ticks(lo, hi, n=6):
    span = hi - lo or 1.0
    step = 10 ** len(str(int(span / n))) / 10 if span / n >= 1 else 0.1
    for m in (1, 2, 5, 10):
        if span / (step * m) <= n:
            step *= m
            break
    t = (lo // step) * step
    out = []
    while t <= hi + 1e-9:
        if t >= lo - 1e-9:
            out.append(round(t, 6))
        t += step
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--width", type=int, default=900)
    ap.add_argument("--height", type=int, default=520)
    ap.add_argument("runs", nargs="+", help="NAME=metrics.jsonl")
    a = ap.parse_args()
    series, offset = [], 0
    for spec in a.runs:
        name, path = spec.split("=", 1)
        train, val = [], []
        for line in open(path):
            r = json.loads(line)
            if "val_loss" in r:
                val.append((offset + r["step"], r["val_loss"]))
            elif "loss" in r:
                train.append((offset + r["step"], r["loss"]))
        if not train:
            raise SystemExit(f"{path}: no training steps")
        series.append((name, train, val))
        offset = train[-1][0]
    xs = [p[0] for _, t, v in series for p in t + v]
    ys = [p[1] for _, t, v in series for p in t + v]
    x_lo, x_hi = 0, max(xs)
    y_lo, y_hi = max(0.0, min(ys) - 0.2), max(ys) + 0.2
    W, H = a.width, a.height
    L, R, T, B = 70, 20, 50, 50
    cv = Canvas(W, H)
    X = lambda x: L + (x - x_lo) / ((x_hi - x_lo) or 1) * (W - L - R)
    Y = lambda y: H - B - (y - y_lo) / ((y_hi - y_lo) or 1) * (H - T - B)
    for t in nice_ticks(y_lo, y_hi):
        cv.line(L, Y(t), W - R, Y(t), (230, 230, 230))
        s = f"{t:g}"
        cv.text(L - 8 - 12 * len(s), Y(t) - 7, s)
    for t in nice_ticks(x_lo, x_hi, 8):
        cv.line(X(t), T, X(t), H - B, (230, 230, 230))
        s = str(int(t))
        cv.text(X(t) - 6 * len(s), H - B + 8, s)
    cv.line(L, T, L, H - B, (0, 0, 0))
    cv.line(L, H - B, W - R, H - B, (0, 0, 0))
    cv.text(W // 2 - 24, H - 22, "step")
    cv.text(L, 12, "loss (nats per token)")
    lx = W - R - 330
    for k, (name, train, val) in enumerate(series):
        light, dark = COLOURS[k % len(COLOURS)]
        for (x0, y0), (x1, y1) in zip(train, train[1:]):
            cv.line(X(x0), Y(y0), X(x1), Y(y1), light)
        for (x0, y0), (x1, y1) in zip(val, val[1:]):
            cv.line(X(x0), Y(y0), X(x1), Y(y1), dark, 1)
        for x, y in val:
            cv.dot(X(x), Y(y), dark, 3)
        ly = T + 8 + 36 * k
        cv.line(lx, ly + 7, lx + 24, ly + 7, light, 1)
        cv.text(lx + 32, ly, f"{name} train")
        cv.line(lx, ly + 25, lx + 24, ly + 25, dark, 1)
        cv.text(lx + 32, ly + 18, f"{name} held-out text")
    cv.png(a.out)


if __name__ == "__main__":
    main()
