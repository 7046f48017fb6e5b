// Load test (loopback, bounded): 64 concurrent streaming clients for LOAD_SECONDS (30) over the
// three streaming APIs, ~15% of them hanging up mid-stream. Requirements: zero 5xx, every stream
// that was not abandoned is well formed and complete, abandoned requests are cancelled (the engine
// drains to idle), and no KV page leaks. Reports client-side p50/p99 TTFT and inter-token latency
// (and the server's own histograms) to stdout and $VELA_WORK/load_report.json.
import assert from "node:assert/strict";
import fs from "node:fs";
import { URL_, KEY, MODEL, get, parseSse, percentile, assertNoLeaks, sleep } from "./common.mjs";

const SECONDS = Number(process.env.LOAD_SECONDS || 30);
const CLIENTS = Number(process.env.LOAD_CLIENTS || 64);
const DISCONNECT_P = 0.15;
let seed = 99;
const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };

const ttft = [], itl = [];
const counts = { ok: 0, aborted: 0, http_5xx: 0, http_429: 0, other_status: 0, malformed: 0, errors: 0 };
const prompts = ["Tell me a story about a lighthouse.", "What is 2 + 2?", "List three colors.",
                 "Explain rain to a child.", "Write a haiku about servers."];

function request() {
  const kind = Math.floor(rand() * 3);
  const max_tokens = 8 + Math.floor(rand() * 56);
  const content = prompts[Math.floor(rand() * prompts.length)] + " #" + Math.floor(rand() * 8);
  if (kind === 0) return ["/v1/chat/completions", { model: MODEL, stream: true, max_tokens, temperature: 0.8,
                          stream_options: { include_usage: true }, messages: [{ role: "user", content }] }, max_tokens];
  if (kind === 1) return ["/v1/completions", { model: MODEL, stream: true, max_tokens, prompt: content }, max_tokens];
  return ["/v1/messages", { model: MODEL, stream: true, max_tokens, messages: [{ role: "user", content }] }, max_tokens];
}

// One streaming request; resolves after validating it (or abandoning it on purpose).
async function one() {
  const [path, body, max_tokens] = request();
  const abandonAfter = rand() < DISCONNECT_P ? 1 + Math.floor(rand() * 4) : -1;
  const ac = new AbortController();
  const t0 = performance.now();
  let res;
  try {
    res = await fetch(URL_ + path, { method: "POST", signal: ac.signal, body: JSON.stringify(body),
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${KEY}` } });
  } catch (e) { counts.errors++; console.log(`fetch failed: ${e.message}`); return; }
  if (res.status >= 500) { counts.http_5xx++; console.log(`5xx: ${await res.text()}`); return; }
  if (res.status === 429) { counts.http_429++; await res.text(); return; }
  if (res.status !== 200) { counts.other_status++; console.log(`${res.status}: ${await res.text()}`); return; }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = "", n_chunks = 0, last = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const now = performance.now();
      text += dec.decode(value, { stream: true });
      n_chunks++;
      if (n_chunks === 1) ttft.push(now - t0); else itl.push(now - last);
      last = now;
      if (abandonAfter > 0 && n_chunks >= abandonAfter) { ac.abort(); counts.aborted++; return; }
    }
  } catch (e) {
    if (ac.signal.aborted) { counts.aborted++; return; }
    counts.errors++; console.log(`stream broke: ${e.message}`); return;
  }
  try {
    const events = parseSse(text);
    if (path === "/v1/messages") {
      const names = events.map((e) => e.event);
      assert.equal(names[0], "message_start");
      assert.deepEqual(names.slice(-2), ["message_delta", "message_stop"]);
      assert.ok(events.at(-2).data.usage.output_tokens <= max_tokens, "output_tokens");
    } else {
      assert.equal(events.at(-1).data, "[DONE]");
      const finishes = events.flatMap((e) => (e.data.choices || []).map((c) => c.finish_reason)).filter(Boolean);
      assert.equal(finishes.length, 1, "one finish_reason");
      if (path === "/v1/chat/completions") {
        // A sampled EOS may end a stream early (a random model, temperature 0.8): then finish "stop".
        const used = events.at(-2).data.usage.completion_tokens;
        if (finishes[0] === "length") assert.equal(used, max_tokens);
        else assert.ok(finishes[0] === "stop" && used <= max_tokens, `finish ${finishes[0]} after ${used}`);
      }
    }
    counts.ok++;
  } catch (e) {
    counts.malformed++;
    console.log(`malformed stream on ${path}: ${e.message}\n${text.slice(0, 500)}`);
  }
}

const deadline = Date.now() + SECONDS * 1000;
const t0 = Date.now();
await Promise.all(Array.from({ length: CLIENTS }, async () => { while (Date.now() < deadline) await one(); }));
const wall = (Date.now() - t0) / 1000;
const s = await assertNoLeaks("after the load test");
const report = {
  clients: CLIENTS, seconds: wall, ...counts,
  requests_per_s: (counts.ok + counts.aborted) / wall,
  client_ttft_ms: { p50: percentile(ttft, 0.5), p99: percentile(ttft, 0.99) },
  client_itl_ms: { p50: percentile(itl, 0.5), p99: percentile(itl, 0.99) },
  server_ttft_s: s.latency.ttft_s, server_itl_s: s.latency.itl_s,
  server_disconnects: s.server.client_disconnects, engine: s.engine,
};
console.log(JSON.stringify(report, null, 1));
if (process.env.VELA_WORK) fs.writeFileSync(process.env.VELA_WORK + "/load_report.json", JSON.stringify(report, null, 1));
assert.equal(counts.http_5xx, 0, "no 5xx");
assert.equal(counts.malformed, 0, "every stream well formed");
assert.equal(counts.errors, 0, "no broken connections");
assert.equal(counts.other_status, 0, "no unexpected statuses");
assert.ok(counts.ok > CLIENTS, "a useful number of complete streams");
assert.ok(s.server.client_disconnects > 0, "the server saw the disconnects");
console.log("load: OK");
