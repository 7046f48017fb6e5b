#!/usr/bin/env python3
"""Python Jinja2 set up exactly as transformers renders chat templates: the reference ("oracle")
for vela's Jinja engine tests.

  jinja_oracle.py fill  CASES.json ...   write each case's "expected" (or "error") from Jinja2
  jinja_oracle.py check CASES.json ...   verify the committed expectations against Jinja2
  jinja_oracle.py chat  CONVERSATIONS.json ASSETS_DIR
                                         render conversation cases; prints {name: text | {"error"}}

Engine cases: [{"name", "template", "context"?: {...}, "expected"?: str, "error"?: str}] where
"error" is a substring of vela's message (Jinja2 must raise too). strftime_now() is pinned to
FIXED_NOW so outputs are reproducible; vela's tests pin the same time.
"""
import datetime
import json
import os
import sys

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.exceptions import TemplateError
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.exit("jinja_oracle.py: Python jinja2 is not installed (Debian: python3-jinja2)")

FIXED_NOW = datetime.datetime(2024, 7, 26, 14, 5, 9)


class GenerationTag(Extension):
    """transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    # Mirrors transformers.utils.chat_template_utils._compile_jinja_template.
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()


def render(template, context, with_type=True):
    """Returns (output, None) or (None, "ExceptionType: message")."""
    try:
        return ENV.from_string(template).render(**context), None
    except Exception as e:  # noqa: BLE001 - any template failure is an expected outcome here
        return None, f"{type(e).__name__}: {e}" if with_type else str(e)


def engine_cases(paths, fill):
    failures = 0
    total = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            cases = json.load(f)
        for case in cases:
            total += 1
            out, err = render(case["template"], case.get("context", {}))
            if fill:
                if err is None:
                    case.pop("error", None)
                    case["expected"] = out
                else:
                    case.pop("expected", None)
                    case.setdefault("error", "")
                    case["python_error"] = err
                continue
            if "error" in case:
                if err is None:
                    failures += 1
                    print(f"FAIL {case['name']}: Jinja2 rendered {out!r}, the case expects an error")
            elif err is not None or out != case.get("expected"):
                failures += 1
                print(f"FAIL {case['name']}: Jinja2 gives {out if err is None else err!r}, "
                      f"the case expects {case.get('expected')!r}")
        if fill:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(cases, f, ensure_ascii=False, indent=1)
                f.write("\n")
    if not fill:
        print(f"Jinja2 {jinja2.__version__} agrees with {total - failures} of {total} engine cases")
    return 1 if failures else 0


def chat(conversations_path, assets):
    with open(conversations_path, encoding="utf-8") as f:
        spec = json.load(f)
    base = os.path.dirname(os.path.abspath(conversations_path))
    templates = {}
    for name, t in spec["templates"].items():
        if "config" in t:
            with open(os.path.join(assets, "tokenizers", t["config"], "tokenizer_config.json"),
                      encoding="utf-8") as f:
                cfg = json.load(f)
            src = cfg["chat_template"]
            if isinstance(src, list):
                src = next(x["template"] for x in src if x["name"] == "default")
            tokens = {}
            for key in ("bos_token", "eos_token"):
                v = cfg.get(key)
                if isinstance(v, dict):
                    v = v.get("content")
                if v:
                    tokens[key] = v
        else:
            with open(os.path.join(base, t["file"]), encoding="utf-8") as f:
                src = f.read()
            tokens = {k: t[k] for k in ("bos_token", "eos_token") if t.get(k)}
        templates[name] = (src, tokens)
    results = {}
    for case in spec["cases"]:
        src, tokens = templates[case["template"]]
        # transformers: render(messages=..., tools=..., documents=None, add_generation_prompt=...,
        # **special_tokens_map, **kwargs)
        context = dict(tokens)
        context.update(messages=case["messages"], tools=case.get("tools"), documents=None,
                       add_generation_prompt=case.get("add_generation_prompt", False))
        context.update(case.get("extra", {}))
        out, err = render(src, context, with_type=False)
        results[case["name"]] = out if err is None else {"error": err}
    json.dump(results, sys.stdout, ensure_ascii=False)
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] in ("fill", "check"):
        return engine_cases(argv[1:], argv[0] == "fill")
    if len(argv) == 3 and argv[0] == "chat":
        return chat(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
