// @huggingface/jinja (the engine transformers.js renders chat templates with) as an oracle for
// vela's chat templates: renders conversation cases and prints {name: text | {"error": msg}}.
//   NODE_PATH=<assets>/node_modules node tools/jinja_oracle_hf.js CONVERSATIONS.json ASSETS_DIR
// The clock is pinned (strftime_now) to the same local time as tools/jinja_oracle.py.
"use strict";
const fs = require("fs");
const path = require("path");

const RealDate = Date;
const FIXED = new RealDate(2024, 6, 26, 14, 5, 9).getTime();
global.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(FIXED);
    else super(...args);
  }
  static now() {
    return FIXED;
  }
};

const { Template } = require("@huggingface/jinja");

function main() {
  const [specPath, assets] = process.argv.slice(2);
  if (!specPath || !assets) {
    console.error("usage: jinja_oracle_hf.js CONVERSATIONS.json ASSETS_DIR");
    process.exit(2);
  }
  const spec = JSON.parse(fs.readFileSync(specPath, "utf8"));
  const base = path.dirname(path.resolve(specPath));
  const templates = {};
  for (const [name, t] of Object.entries(spec.templates)) {
    let src;
    const tokens = {};
    if (t.config) {
      const cfg = JSON.parse(
        fs.readFileSync(path.join(assets, "tokenizers", t.config, "tokenizer_config.json"), "utf8"));
      src = cfg.chat_template;
      if (Array.isArray(src)) src = src.find((x) => x.name === "default").template;
      for (const key of ["bos_token", "eos_token"]) {
        let v = cfg[key];
        if (v && typeof v === "object") v = v.content;
        if (v) tokens[key] = v;
      }
    } else {
      src = fs.readFileSync(path.join(base, t.file), "utf8");
      for (const key of ["bos_token", "eos_token"]) if (t[key]) tokens[key] = t[key];
    }
    templates[name] = { template: new Template(src), tokens };
  }
  const results = {};
  for (const c of spec.cases) {
    const { template, tokens } = templates[c.template];
    const context = Object.assign({}, tokens, {
      messages: c.messages,
      tools: c.tools === undefined ? null : c.tools,
      documents: null,
      add_generation_prompt: !!c.add_generation_prompt,
    }, c.extra || {});
    try {
      results[c.name] = template.render(context);
    } catch (e) {
      results[c.name] = { error: String(e && e.message ? e.message : e) };
    }
  }
  process.stdout.write(JSON.stringify(results));
}

main();
