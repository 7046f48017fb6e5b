// Oracle: encodes each line (a JSON string) of a strings file with the Hugging Face `tokenizers`
// binding and prints one JSON object per line: {"ids": [...], "ids_special": [...], "text": decode}.
//   NODE_PATH=.cache/assets/node_modules node encode_oracle.js TOKENIZER_JSON STRINGS_JSONL
// A GPT-2 directory (encoder.json + vocab.bpe) is turned into the tokenizer.json Hugging Face
// ships for gpt2 first.
'use strict';
const fs = require('fs');
const path = require('path');
const {Tokenizer} = require('tokenizers');

function gpt2Json(dir) {
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'encoder.json'), 'utf8'));
  const merges = fs.readFileSync(path.join(dir, 'vocab.bpe'), 'utf8').split('\n')
    .map((l) => l.replace(/\r$/, '')).filter((l, i) => l.length > 0 && !(i === 0 && l.startsWith('#version')));
  return JSON.stringify({
    version: '1.0', truncation: null, padding: null,
    added_tokens: [{id: vocab['<|endoftext|>'], content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false, normalized: true, special: true}],
    normalizer: null,
    pre_tokenizer: {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true},
    post_processor: {type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true},
    decoder: {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true},
    model: {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab, merges},
  });
}

(async () => {
  const [tokPath, stringsPath] = process.argv.slice(2);
  const t = fs.statSync(tokPath).isDirectory() && fs.existsSync(path.join(tokPath, 'encoder.json'))
    ? Tokenizer.fromString(gpt2Json(tokPath))
    : Tokenizer.fromFile(fs.statSync(tokPath).isDirectory() ? path.join(tokPath, 'tokenizer.json') : tokPath);
  const lines = fs.readFileSync(stringsPath, 'utf8').split('\n').filter((l) => l.length > 0);
  const one = async (line) => {
    const s = JSON.parse(line);
    const ids = (await t.encode(s, null, {addSpecialTokens: false})).getIds();
    const idsSpecial = (await t.encode(s, null, {addSpecialTokens: true})).getIds();
    const text = await t.decode(ids, false);
    const textSkip = await t.decode(idsSpecial, true);
    return JSON.stringify({ids, ids_special: idsSpecial, text, text_skip: textSkip});
  };
  // The binding runs each call as an async task: keep a batch in flight at once.
  const out = [];
  for (let i = 0; i < lines.length; i += 256) out.push(...await Promise.all(lines.slice(i, i + 256).map(one)));
  process.stdout.write(out.join('\n') + '\n');
})().catch((e) => { console.error(e); process.exit(1); });
