// Hugging Face `tokenizers` (N-API binding) single-thread encode throughput, the baseline for
// `vela tokenize bench`. Run with RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false; encodes the
// file line by line and in ~64 KB pieces (no encodeBatch) and prints one JSON line per mode
// (wall and CPU time: process.cpuUsage counts the binding's worker thread too).
//   NODE_PATH=.cache/assets/node_modules node bench/tokenizer_bench_hf.js TOKENIZER_JSON FILE
'use strict';
const fs = require('fs');
const {Tokenizer} = require('tokenizers');
(async () => {
  const [tokPath, file] = process.argv.slice(2);
  const t = Tokenizer.fromFile(tokPath);
  const text = fs.readFileSync(file, 'utf8');
  const cut = (target) => {
    const lines = text.split(/(?<=\n)/); const out = []; let cur = '';
    for (const l of lines) { cur += l; if (cur.length >= target) { out.push(cur); cur = ''; } }
    if (cur) out.push(cur);
    return out;
  };
  await t.encode('warm up', null, {addSpecialTokens: false});
  const bytes = Buffer.byteLength(text, 'utf8');
  for (const [mode, target] of [['lines', 1], ['64KB', 1 << 16]]) {
    const pieces = cut(target);
    let nTokens = 0;
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (const p of pieces) nTokens += (await t.encode(p, null, {addSpecialTokens: false})).getIds().length;
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const cu = process.cpuUsage(c0); const cpu = (cu.user + cu.system) / 1e6;
    console.log(JSON.stringify({impl: 'hf_tokenizers', mode, bytes, tokens: nTokens, wall_s: +wall.toFixed(3), cpu_s: +cpu.toFixed(3),
      mb_per_s_wall: +(bytes / 1e6 / wall).toFixed(2), mb_per_s_cpu: +(bytes / 1e6 / cpu).toFixed(2)}));
  }
})();
