// Lists the code points that Hugging Face tokenizers' normalizers (older Unicode tables in its
// unicode-normalization crate) leave unchanged but a newer utf8proc decomposes: one JSON line per
// form, {"form": "NFKD", "cps": [...]}. Pipe into gen_norm_exceptions.py with vela's own output.
//   NODE_PATH=.cache/assets/node_modules node tools/tokenizer/oracle_norm_exceptions.js > /tmp/hf_norm.jsonl
'use strict';
const {Tokenizer} = require('tokenizers');
for (const form of ['NFD', 'NFKD']) {
  const t = Tokenizer.fromString(JSON.stringify({version: '1.0', truncation: null, padding: null, added_tokens: [],
    normalizer: {type: form}, pre_tokenizer: null, post_processor: null, decoder: null,
    model: {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, vocab: {}, merges: []}}));
  const n = t.getNormalizer();
  const unchanged = [];
  for (let c = 0xA0; c < 0x110000; c++) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const s = String.fromCodePoint(c);
    if (n.normalizeString(s) === s) unchanged.push(c);
  }
  console.log(JSON.stringify({form, unchanged}));
}
