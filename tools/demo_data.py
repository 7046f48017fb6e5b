#!/usr/bin/env python3
"""Builds the demo model's data (scripts/demo_data.sh runs it; stdlib only).

Inputs: the Bible corpus of scripts/fetch_corpus.sh (WEB + KJV, one JSONL document per chapter)
and the unpacked Debian packages dict-devil, dict-jargon and r-cran-janeaustenr (dpkg -x into
ROOT). Outputs in OUT:

  pretrain_train.jsonl / pretrain_valid.jsonl   {"source", "ref", "text"} for `vela preprocess`
  tokenizer_train.txt                            the training text, for `vela tokenize train`
  sft_train.jsonl / sft_valid.jsonl              {"task", "messages", "answer", "prompt",
                                                 "completion"}: the questions; sft_valid.jsonl is
                                                 what tools/demo_sft_eval.py scores
  sft_mix_train.jsonl                            the SFT set for `vela preprocess` (format text):
                                                 {"prompt" (masked), "completion"} per question,
                                                 the prompt rendered by the ChatML template, plus
                                                 {"text"} for half the pretraining documents
  data.json                                      counts per source / task and sha256 per file

Held out from pretraining (validation text, never trained on): the Bible books of
fetch_corpus.sh (Ruth, Joel, Jonah, Titus, Philemon, Jude) and every 12th chapter of each
Austen novel. The SFT tasks, each answerable by exact match:

  book     "Which book of the Bible is this verse from?" + a verse -> the book's name. Verses from
           the training books (seen in pretraining); the held-out verses are never in SFT.
  novel    "Which Jane Austen novel is this passage from?" + a passage -> the title. Held-out
           passages come from the held-out chapters: text the model has never seen.
  define   "Define WORD." -> the Devil's Dictionary entry (first paragraph). Every entry is in
           pretraining; the held-out words never appear in SFT (recall through the chat format).
  jargon   "What does TERM mean in hacker jargon?" -> the Jargon File entry's first paragraph.
  define_seen  100 "Define WORD." questions of the SFT training set, scored apart (memorisation).
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import re
import struct
import sys
import zlib

BOOK_NAMES = {
    "Gen": "Genesis", "Exod": "Exodus", "Lev": "Leviticus", "Num": "Numbers",
    "Deut": "Deuteronomy", "Josh": "Joshua", "Judg": "Judges", "Ruth": "Ruth",
    "1Sam": "1 Samuel", "2Sam": "2 Samuel", "1Kgs": "1 Kings", "2Kgs": "2 Kings",
    "1Chr": "1 Chronicles", "2Chr": "2 Chronicles", "Ezra": "Ezra", "Neh": "Nehemiah",
    "Esth": "Esther", "Job": "Job", "Ps": "Psalms", "Prov": "Proverbs", "Eccl": "Ecclesiastes",
    "Song": "Song of Solomon", "Isa": "Isaiah", "Jer": "Jeremiah", "Lam": "Lamentations",
    "Ezek": "Ezekiel", "Dan": "Daniel", "Hos": "Hosea", "Joel": "Joel", "Amos": "Amos",
    "Obad": "Obadiah", "Jonah": "Jonah", "Mic": "Micah", "Nah": "Nahum", "Hab": "Habakkuk",
    "Zeph": "Zephaniah", "Hag": "Haggai", "Zech": "Zechariah", "Mal": "Malachi",
    "Matt": "Matthew", "Mark": "Mark", "Luke": "Luke", "John": "John", "Acts": "Acts",
    "Rom": "Romans", "1Cor": "1 Corinthians", "2Cor": "2 Corinthians", "Gal": "Galatians",
    "Eph": "Ephesians", "Phil": "Philippians", "Col": "Colossians",
    "1Thess": "1 Thessalonians", "2Thess": "2 Thessalonians", "1Tim": "1 Timothy",
    "2Tim": "2 Timothy", "Titus": "Titus", "Phlm": "Philemon", "Heb": "Hebrews",
    "Jas": "James", "1Pet": "1 Peter", "2Pet": "2 Peter", "1John": "1 John",
    "2John": "2 John", "3John": "3 John", "Jude": "Jude", "Rev": "Revelation",
}
NOVELS = {
    "emma": "Emma", "mansfieldpark": "Mansfield Park", "northangerabbey": "Northanger Abbey",
    "persuasion": "Persuasion", "prideprejudice": "Pride and Prejudice",
    "sensesensibility": "Sense and Sensibility",
}
AUSTEN_VALID_EVERY = 12  # chapter k of a novel is held out when k % 12 == 11
MAX_ANSWER_CHARS = 320


def fail(msg):
    raise SystemExit(f"[demo-data] {msg}")


# ---- R lazy-load database (janeaustenr's data/Rdata.{rdx,rdb}) ----------------------------------
def r_unserialize(data):
    """The subset of R's XDR serialization janeaustenr's data uses: lists, names, strings, ints."""
    pos = 0

    def i32():
        nonlocal pos
        v = struct.unpack_from(">i", data, pos)[0]
        pos += 4
        return v

    if data[:2] != b"X\n":
        fail("janeaustenr: not an XDR serialization")
    pos = 2
    version = i32()
    i32(), i32()
    if version == 3:
        n_enc = i32()  # native encoding name
        pos += n_enc
    refs = []

    def item():
        nonlocal pos
        flags = i32()
        kind = flags & 0xFF
        has_attr, has_tag = flags & (1 << 9), flags & (1 << 10)
        if kind == 254:  # NILVALUE_SXP
            return None
        if kind == 255:  # REFSXP
            return refs[(flags >> 8) - 1]
        if kind == 1:  # SYMSXP
            s = item()
            refs.append(s)
            return s
        if kind == 9:  # CHARSXP
            n = i32()
            if n == -1:
                return None
            s = data[pos:pos + n].decode("utf-8", "replace")
            pos += n
            return s
        if kind == 2:  # LISTSXP (pairlist: attributes)
            if has_attr:
                item()
            tag = item() if has_tag else None
            car = item()
            cdr = item()
            return [(tag, car)] + (cdr if isinstance(cdr, list) else [])
        if kind in (10, 13):  # LGLSXP, INTSXP
            n = i32()
            v = list(struct.unpack_from(f">{n}i", data, pos))
            pos += 4 * n
        elif kind in (16, 19):  # STRSXP, VECSXP
            v = [item() for _ in range(i32())]
        else:
            fail(f"janeaustenr: unsupported R type {kind}")
        if has_attr:
            attrs = dict(item())
            if kind == 19 and "names" in attrs:
                return dict(zip(attrs["names"], v))
        return v

    return item()


def austen_novels(root):
    d = os.path.join(root, "usr/lib/R/site-library/janeaustenr/data")
    index = r_unserialize(gzip.decompress(open(os.path.join(d, "Rdata.rdx"), "rb").read()))
    rdb = open(os.path.join(d, "Rdata.rdb"), "rb").read()
    for key, title in NOVELS.items():
        if key not in index["variables"]:
            fail(f"janeaustenr has no '{key}' (has {sorted(index['variables'])})")
        off, n = index["variables"][key]
        lines = r_unserialize(zlib.decompress(rdb[off + 4:off + n]))
        yield key, title, lines


def austen_chapters(lines):
    """Chapters as lists of paragraphs (the text's hard line breaks joined)."""
    chapters, paras, cur = [], None, []
    for line in lines + [""]:
        line = (line or "").strip()
        if re.match(r"^(CHAPTER|Chapter) [0-9IVXLC]+\.?$", line):
            if paras is not None:
                chapters.append(paras)
            paras, cur = [], []
            continue
        if paras is None:
            continue
        if line:
            cur.append(line)
        elif cur:
            text = " ".join(cur).replace("_", "")
            if not re.match(r"^(VOLUME|Volume|THE END|FINIS)\b", text):
                paras.append(text)
            cur = []
    if paras:
        chapters.append(paras)
    return chapters


# ---- dictd databases (.index + gzip'd .dict.dz) -------------------------------------------------
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64num(s):
    v = 0
    for ch in s:
        v = v * 64 + B64.index(ch)
    return v


def dict_entries(root, name):
    base = os.path.join(root, "usr/share/dictd", name)
    text = gzip.decompress(open(base + ".dict.dz", "rb").read())
    seen = set()
    for line in open(base + ".index", encoding="utf-8"):
        head, off, size = line.rstrip("\n").split("\t")
        if head.startswith("00database") or head.startswith("00-database"):
            continue
        key = (off, size)
        if key in seen:  # several headwords may point at one entry
            continue
        seen.add(key)
        o, n = b64num(off), b64num(size)
        yield head, text[o:o + n].decode("utf-8", "replace")


def first_paragraph(body):
    paras = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", body.strip())]
    return next((p for p in paras if p), "")


def clip(text, limit=MAX_ANSWER_CHARS):
    """At most `limit` chars, cut after a sentence end when the text is longer."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind(". ", 0, limit), text.rfind("; ", 0, limit))
    return text[:cut + 1] if cut > limit // 3 else text[:limit].rsplit(" ", 1)[0] + " ..."


def devil_entries(root):
    """(WORD, entry text) of The Devil's Dictionary: 'ABSURDITY, n.  A statement ...'."""
    out = []
    for head, body in dict_entries(root, "devil"):
        text = re.sub(r"[ \t]*\n[ \t]*", "\n", body.strip())
        text = re.sub(r"\{([^}]*)\}", r"\1", text)
        m = re.match(r"^([A-Z][A-Z' .-]*[A-Z.]),", text)
        if not m:
            continue
        out.append((m.group(1).strip(), text))
    return out


def jargon_entries(root):
    """(term, entry text) of the Jargon File: the term line, pronunciation/part of speech, body."""
    out = []
    for head, body in dict_entries(root, "jargon"):
        lines = body.strip("\n").split("\n")
        term = lines[0].strip()
        rest = "\n".join(lines[1:])
        rest = re.sub(r"\{\s*([^}]*?)\s*\}", lambda m: re.sub(r"\s+", " ", m.group(1)), rest)
        if not term or not rest.strip():
            continue
        out.append((term, term + "\n" + "\n".join(l.strip() for l in rest.split("\n")).strip()))
    return out


def jargon_meaning(entry):
    """The first paragraph that is the definition (not the pronunciation / etymology line)."""
    paras = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", entry.split("\n", 1)[1])]
    for p in paras:
        p = re.sub(r"^\[[^\]]*\]\s*", "", p)  # [from ...] / [Purdue] origin notes
        p = re.sub(r"^1\.\s+", "", p)
        if len(p) >= 25 and not re.match(r"^(/|(n|v|vt|vi|adj|adv|interj|excl|pl)\b)", p):
            return p
    return ""


# ---- main -------------------------------------------------------------------------------------
def chat(question, answer):
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def chatml_prompt(messages):
    """The ChatML template (tools/demo_tokenizer.py) rendered with add_generation_prompt."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + \
        "<|im_start|>assistant\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="fetch_corpus.sh output (train/valid.jsonl)")
    ap.add_argument("--root", required=True, help="dpkg -x root of dict-devil, dict-jargon, r-cran-janeaustenr")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n-book-train", type=int, default=16000)
    ap.add_argument("--n-book-valid", type=int, default=300)
    ap.add_argument("--n-novel-train", type=int, default=6000)
    ap.add_argument("--n-novel-valid", type=int, default=300)
    ap.add_argument("--valid-fraction-dict", type=float, default=0.08)
    ap.add_argument("--n-define-seen", type=int, default=100,
                    help="SFT-trained definitions also scored (task define_seen)")
    ap.add_argument("--sft-text-fraction", type=float, default=0.5,
                    help="share of the pretraining documents mixed into the SFT set")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    pre = {"train": [], "valid": []}
    counts = {}

    def add_doc(split, source, ref, text):
        pre[split].append({"source": source, "ref": ref, "text": text})
        c = counts.setdefault(source, {"train_docs": 0, "valid_docs": 0, "train_bytes": 0, "valid_bytes": 0})
        c[split + "_docs"] += 1
        c[split + "_bytes"] += len(text.encode("utf-8"))

    # Bibles: documents as fetch_corpus.sh wrote them; verses (KJV lines, WEB lines) for "book".
    verses = []  # (book name, verse text)
    for split in ("train", "valid"):
        path = os.path.join(args.corpus, split + ".jsonl")
        if not os.path.exists(path):
            fail(f"{path} missing: run scripts/fetch_corpus.sh first")
        for line in open(path, encoding="utf-8"):
            d = json.loads(line)
            add_doc(split, d["source"], d["ref"], d["text"])
            book = BOOK_NAMES.get(d["ref"].split(".")[0])  # the WEB's deuterocanon: text only
            if split == "train" and book:
                for v in d["text"].split("\n"):
                    v = v.strip()
                    if 40 <= len(v) <= 240 and not v.startswith("<"):
                        verses.append((book, v))
    # Austen: one document per chapter; every 12th chapter held out.
    passages = {"train": [], "valid": []}  # (title, passage)
    for key, title, lines in austen_novels(args.root):
        chapters = austen_chapters(lines)
        if len(chapters) < 20:
            fail(f"janeaustenr {key}: only {len(chapters)} chapters found")
        for k, paras in enumerate(chapters):
            split = "valid" if k % AUSTEN_VALID_EVERY == AUSTEN_VALID_EVERY - 1 else "train"
            add_doc(split, "austen", f"{key}.{k + 1}", "\n".join(paras))
            for p in paras:
                if len(p) >= 120:
                    passages[split].append((title, clip(p, 300)))
    # Dictionaries: every entry is pretraining text (documents of ~30 entries, in order).
    devil = devil_entries(args.root)
    jargon = jargon_entries(args.root)
    if len(devil) < 900 or len(jargon) < 2000:
        fail(f"only {len(devil)} Devil's Dictionary / {len(jargon)} Jargon File entries parsed")
    for source, entries in (("devil", devil), ("jargon", jargon)):
        for i in range(0, len(entries), 30):
            add_doc("train", source, f"{source}.{i // 30}", "\n\n".join(e for _, e in entries[i:i + 30]))

    # SFT tasks.
    sft = {"train": [], "valid": []}

    def add_q(split, task, question, answer):
        sft[split].append({"task": task, "messages": chat(question, answer), "answer": answer,
                           "prompt": chatml_prompt([{"role": "user", "content": question}]),
                           "completion": answer + "<|im_end|>\n"})

    rng.shuffle(verses)
    need = args.n_book_train + args.n_book_valid
    if len(verses) < need:
        fail(f"only {len(verses)} verses for the book task (need {need})")
    for i, (book, v) in enumerate(verses[:need]):
        add_q("valid" if i < args.n_book_valid else "train", "book",
              f"Which book of the Bible is this verse from?\n\n{v}", book)
    for split, n in (("train", args.n_novel_train), ("valid", args.n_novel_valid)):
        rng.shuffle(passages[split])
        for title, p in passages[split][:n]:
            add_q(split, "novel", f"Which Jane Austen novel is this passage from?\n\n{p}", title)
    n_seen = 0
    for task, entries in (("define", devil), ("jargon", jargon)):
        order = list(range(len(entries)))
        rng.shuffle(order)
        n_valid = int(round(len(entries) * args.valid_fraction_dict))
        for rank, idx in enumerate(order):
            word, text = entries[idx]
            split = "valid" if rank < n_valid else "train"
            if task == "define":
                answer = clip(first_paragraph(text))
                if not answer:
                    continue
                for q in ((f"Define {word.lower()}.",) if split == "valid" else
                          (f"Define {word.lower()}.", f"Define {word}.",
                           f"What does the Devil's Dictionary say about {word.lower()}?")):
                    add_q(split, task, q, answer)
                if split == "train" and n_seen < args.n_define_seen:  # scored, but also trained
                    n_seen += 1
                    add_q("valid", "define_seen", f"Define {word.lower()}.", answer)
            else:
                answer = clip(jargon_meaning(text))
                if not answer:
                    continue
                add_q(split, task, f"What does {word} mean in hacker jargon?", answer)
    for split in sft:
        rng.shuffle(sft[split])
    # The SFT mix: every training question (prompt masked, answer + <|im_end|> trained) and a
    # share of the pretraining documents (all trained), so SFT does not erase the language model.
    mix = [{"prompt": r["prompt"], "completion": r["completion"]} for r in sft["train"]]
    mix += [{"text": d["text"]} for d in pre["train"] if rng.random() < args.sft_text_fraction]
    rng.shuffle(mix)

    files = {}
    for split in ("train", "valid"):
        files[f"pretrain_{split}.jsonl"] = pre[split]
        files[f"sft_{split}.jsonl"] = sft[split]
    files["sft_mix_train.jsonl"] = mix
    for name, records in files.items():
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "tokenizer_train.txt"), "w", encoding="utf-8") as f:
        for d in pre["train"]:
            f.write(d["text"] + "\n\n")
    summary = {"sources": counts, "sft": {}, "files": {}}
    for split in sft:
        for r in sft[split]:
            k = summary["sft"].setdefault(r["task"], {"train": 0, "valid": 0})
            k[split] += 1
    for name in list(files) + ["tokenizer_train.txt"]:
        data = open(os.path.join(args.out, name), "rb").read()
        summary["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    json.dump(summary, open(os.path.join(args.out, "data.json"), "w"), indent=2)
    print("[demo-data] " + json.dumps({"sources": counts, "sft": summary["sft"]}), file=sys.stderr)


if __name__ == "__main__":
    main()
