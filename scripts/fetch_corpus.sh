#!/usr/bin/env bash
# Builds the public-domain demo corpus (ASSETS.md) as JSONL for `vela preprocess`: one document
# per Bible chapter, {"source", "ref", "text"}, from two Debian packages installed here with apt
# only when missing:
#   sword-text-web   World English Bible (SWORD zText module: zlib blocks of OSIS XML; notes and
#                    non-psalm headings dropped, paragraphs / poetry lines kept as newlines)
#   bible-kjv        King James Version (`bible -f -l100000 gen1:1-rev22:21`)
# Held out for validation, in both translations (so no chapter leaks across the split): Ruth,
# Joel, Jonah, Titus, Philemon, Jude.
#
#   scripts/fetch_corpus.sh [OUT_DIR]        default ${VELA_CORPUS:-.cache/corpus} (git-ignored)
#   -> OUT_DIR/{train,valid}.jsonl, OUT_DIR/train.txt (plain text for `vela tokenize train`),
#      OUT_DIR/corpus.json (counts and sha256 of each file)
# Idempotent; prints the next steps (tokenizer, preprocess) at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${VELA_CORPUS:-.cache/corpus}}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
SWORD=/usr/share/sword/modules/texts/ztext/engWEB2015eb

need=()
[ -f "$SWORD/ot.bzz" ] || need+=(sword-text-web)
command -v bible >/dev/null || need+=(bible-kjv bible-kjv-text)
if [ ${#need[@]} -gt 0 ]; then
  echo "[corpus] installing ${need[*]} (apt)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get install -y --no-install-recommends "${need[@]}" >&2 ||
    { $SUDO apt-get update >&2 && $SUDO apt-get install -y --no-install-recommends "${need[@]}" >&2; }
fi

kjv="$OUT/.kjv.txt"
bible -f -l100000 gen1:1-rev22:21 > "$kjv"

python3 - "$SWORD" "$kjv" "$OUT" <<'PY'
import hashlib, html, json, os, re, struct, sys, zlib

sword, kjv_path, out = sys.argv[1:4]
# Canonical (Protestant) order of the 66 books as OSIS ids; the KJV tool lists them in this order.
OSIS = ("Gen Exod Lev Num Deut Josh Judg Ruth 1Sam 2Sam 1Kgs 2Kgs 1Chr 2Chr Ezra Neh Esth Job Ps "
        "Prov Eccl Song Isa Jer Lam Ezek Dan Hos Joel Amos Obad Jonah Mic Nah Hab Zeph Hag Zech Mal "
        "Matt Mark Luke John Acts Rom 1Cor 2Cor Gal Eph Phil Col 1Thess 2Thess 1Tim 2Tim Titus Phlm "
        "Heb Jas 1Pet 2Pet 1John 2John 3John Jude Rev").split()
VALID_BOOKS = {"Ruth", "Joel", "Jonah", "Titus", "Phlm", "Jude"}

def clean_lines(text):
    lines = [re.sub(r"[ \t\u00a0]+", " ", l).strip() for l in text.split("\n")]
    return "\n".join(l for l in lines if l)

def web_chapters():
    """(ref, text) for every chapter of the WEB module, in book order."""
    for testament in ("ot", "nt"):
        bzs = open(os.path.join(sword, testament + ".bzs"), "rb").read()
        bzv = open(os.path.join(sword, testament + ".bzv"), "rb").read()
        bzz = open(os.path.join(sword, testament + ".bzz"), "rb").read()
        blocks = {}
        def block(i):
            if i not in blocks:
                off, size, usize = struct.unpack_from("<III", bzs, 12 * i)
                data = zlib.decompress(bzz[off:off + size])
                if len(data) != usize:
                    raise SystemExit(f"[corpus] {testament}.bzz block {i}: {len(data)} bytes, index says {usize}")
                blocks.clear()
                blocks[i] = data
            return blocks[i]
        verses = []
        for k in range(len(bzv) // 10):
            b, off, size = struct.unpack_from("<IIH", bzv, 10 * k)
            if size:
                verses.append(block(b)[off:off + size].decode("utf-8"))
        osis = " ".join(verses)
        for m in re.finditer(r'<chapter\b[^>]*\bsID="([^"]+)"[^>]*/>(.*?)<chapter\b[^>]*\beID="\1"[^>]*/>',
                             osis, re.S):
            ref, body = m.group(1), m.group(2)
            # A note often stands where a space was ("God</w><note>..</note><w>created"): leave a
            # space, and take it back before punctuation.
            body = re.sub(r"<note\b.*?</note>", " ", body, flags=re.S)
            body = re.sub(r'<title\b(?![^>]*type="psalm")[^>]*>.*?</title>', "\n", body, flags=re.S)
            body = re.sub(r"<(?:div|l|lg|lb|p|list|item)\b[^>]*>|</(?:l|lg|p|list|item|title)>", "\n", body)
            body = re.sub(r"<[^>]+>", "", body)
            body = re.sub(r"[ \t]+(?=[.,;:!?\u201d\u2019)])", "", body)
            yield ref, clean_lines(html.unescape(body))

def kjv_chapters():
    chapters, order, abbrev_to_osis = {}, [], {}
    for line in open(kjv_path, encoding="utf-8"):
        m = re.match(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$", line.rstrip("\n"))
        if not m:
            continue
        abbrev, ch, text = m.group(1), int(m.group(2)), m.group(4)
        if abbrev not in abbrev_to_osis:
            abbrev_to_osis[abbrev] = OSIS[len(abbrev_to_osis)]
        ref = f"{abbrev_to_osis[abbrev]}.{ch}"
        if ref not in chapters:
            chapters[ref] = []
            order.append(ref)
        chapters[ref].append(text.strip())
    if len(abbrev_to_osis) != 66:
        raise SystemExit(f"[corpus] expected 66 KJV books, found {len(abbrev_to_osis)}")
    for ref in order:
        yield ref, "\n".join(chapters[ref])

counts = {"train": [0, 0], "valid": [0, 0]}
files = {s: open(os.path.join(out, s + ".jsonl"), "w", encoding="utf-8") for s in counts}
txt = open(os.path.join(out, "train.txt"), "w", encoding="utf-8")
for source, gen in (("web", web_chapters()), ("kjv", kjv_chapters())):
    n = 0
    for ref, text in gen:
        if len(text) < 20:
            continue
        split = "valid" if ref.split(".")[0] in VALID_BOOKS else "train"
        files[split].write(json.dumps({"source": source, "ref": ref, "text": text}, ensure_ascii=False) + "\n")
        counts[split][0] += 1
        counts[split][1] += len(text.encode("utf-8"))
        if split == "train":
            txt.write(text + "\n\n")
        n += 1
    if n < 1000:
        raise SystemExit(f"[corpus] only {n} chapters from {source}: the source looks broken")
    print(f"[corpus] {source}: {n} chapters", file=sys.stderr)
for f in list(files.values()) + [txt]:
    f.close()
summary = {}
for name in ("train.jsonl", "valid.jsonl", "train.txt"):
    data = open(os.path.join(out, name), "rb").read()
    summary[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
for s, (docs, nbytes) in counts.items():
    summary[s + ".jsonl"]["documents"] = docs
json.dump(summary, open(os.path.join(out, "corpus.json"), "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
rm -f "$kjv"
cat >&2 <<EOF
[corpus] wrote $OUT/{train,valid}.jsonl
next steps (see docs/data.md):
  build/vela tokenize train --vocab-size 8192 --special "<|endoftext|>,<|im_start|>,<|im_end|>" $OUT/train.txt --out $OUT/tokenizer
  build/vela preprocess --config examples/pretrain_prep.json $OUT/train.jsonl -o $OUT/shards/train
  build/vela preprocess --config examples/pretrain_prep.json $OUT/valid.jsonl -o $OUT/shards/valid
EOF
