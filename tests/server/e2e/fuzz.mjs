// Fuzz-style robustness: thousands of mutated request bodies (wrong types, missing and extra
// fields, out-of-range numbers, deep nesting, truncated or corrupted JSON, invalid UTF-8) posted
// to every POST route, 8 at a time. Every answer must be a success of the right shape or a 4xx
// with a well-formed error object in the route's flavor; never a 5xx, a dropped connection or a
// dead server. Afterwards the engine must be idle with no leaked KV pages.
import assert from "node:assert/strict";
import { URL_, KEY, MODEL, post, get, parseSse, assertNoLeaks } from "./common.mjs";

const N = Number(process.env.FUZZ_N || 3000);
const CONCURRENCY = 8;
let seed = Number(process.env.FUZZ_SEED || 12345);
const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const pick = (a) => a[Math.floor(rand() * a.length)];

const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];
const seeds = [
  ["/v1/chat/completions", { model: MODEL, messages: [{ role: "system", content: "s" }, { role: "user", content: "hi" }], max_tokens: 4 }],
  ["/v1/chat/completions", { messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], max_tokens: 3, stream: true,
                             stream_options: { include_usage: true }, logprobs: true, top_logprobs: 2, n: 2, stop: ["a"] }],
  ["/v1/chat/completions", { messages: [{ role: "user", content: "w?" }], tools, tool_choice: "auto", max_tokens: 3, seed: 1 }],
  ["/v1/completions", { model: MODEL, prompt: "abc", max_tokens: 4, logprobs: 1, echo: false }],
  ["/v1/completions", { prompt: [[1, 2, 3], [4, 5]], max_tokens: 2, stream: true, n: 2 }],
  ["/v1/messages", { model: MODEL, max_tokens: 4, system: "s", messages: [{ role: "user", content: "hi" }], stop_sequences: ["x"] }],
  ["/v1/messages", { max_tokens: 3, stream: true, messages: [{ role: "user", content: [{ type: "text", text: "hi" }] },
                    { role: "assistant", content: [{ type: "tool_use", id: "t", name: "f", input: {} }] },
                    { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "r" }] }],
                    tools: [{ name: "f", input_schema: { type: "object" } }] }],
  ["/v1/messages/count_tokens", { model: MODEL, messages: [{ role: "user", content: "hi" }] }],
];
const KEYS = ["model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
  "min_p", "n", "stop", "stream", "stream_options", "logprobs", "top_logprobs", "seed", "logit_bias", "tools",
  "tool_choice", "presence_penalty", "frequency_penalty", "system", "stop_sequences", "echo", "role", "content",
  "type", "text", "name", "arguments", "function", "include_usage", "input", "tool_calls", "best_of", "suffix"];

function randomValue(depth = 0) {
  switch (Math.floor(rand() * 22)) {
    case 0: return null;
    case 1: return rand() < 0.5;
    case 2: return -1;
    case 3: return 0;
    case 4: return 1e308;
    case 5: return -(2 ** 40);
    case 6: return 2 ** 53;
    case 7: return rand() * 4 - 2;
    case 8: return "";
    case 9: return "x".repeat(Math.floor(rand() * 3000));
    case 10: return "😀\u0000<think></tool_call>\ud800";
    case 11: return [];
    case 12: return depth < 3 ? [randomValue(depth + 1), randomValue(depth + 1)] : [1];
    case 13: return {};
    case 14: return depth < 3 ? { [pick(KEYS)]: randomValue(depth + 1) } : { a: 1 };
    case 15: { let v = []; for (let i = 0; i < 300; i++) v = [v]; return v; }
    case 16: return [{ role: pick(["user", "assistant", "tool", "system", "bot", ""]), content: randomValue(depth + 1) }];
    case 17: return Math.floor(rand() * 300000);
    case 18: return { "151643": 100, "-3": 1, "abc": 2 };
    case 19: return pick(["user", "auto", "none", "required", "text", "function", "tool", "any"]);
    case 20: return [pick(KEYS), 5, null];
    default: return 3;
  }
}

// Picks a random object (or array) node inside v.
function randomNode(v) {
  let node = v;
  for (let i = 0; i < 4 && node && typeof node === "object"; i++) {
    const keys = Object.keys(node);
    if (!keys.length || rand() < 0.4) break;
    const k = pick(keys);
    if (node[k] && typeof node[k] === "object") node = node[k]; else break;
  }
  return node;
}

function mutate(body) {
  const b = structuredClone(body);
  const n_ops = 1 + Math.floor(rand() * 3);
  for (let i = 0; i < n_ops; i++) {
    const node = randomNode(b);
    if (!node || typeof node !== "object") continue;
    const keys = Object.keys(node);
    const r = rand();
    if (r < 0.45) node[rand() < 0.6 && keys.length ? pick(keys) : pick(KEYS)] = randomValue();
    else if (r < 0.7 && keys.length) delete node[pick(keys)];
    else if (Array.isArray(node)) node.push(randomValue());
    else node[pick(KEYS)] = randomValue();
  }
  // Keep generations short: the point is the parsing, not decoding 256 tokens each time.
  if (typeof b.max_tokens === "number" && b.max_tokens > 16 && rand() < 0.9) b.max_tokens = 8;
  if (typeof b.n === "number" && b.n > 4 && rand() < 0.9) b.n = 2;
  let text = JSON.stringify(b);
  const r = rand();
  if (r < 0.06) text = text.slice(0, Math.floor(rand() * text.length));                 // truncated
  else if (r < 0.10) { const p = Math.floor(rand() * text.length); text = text.slice(0, p) + pick(["\"", "}", "\\", "\u0000", ",", "\\u12"]) + text.slice(p); }
  else if (r < 0.12) return Buffer.concat([Buffer.from(text.slice(0, -2)), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from("\"}")]); // invalid UTF-8
  else if (r < 0.14) text = JSON.stringify(randomValue());                               // not an object
  return text;
}

const stats = { total: 0, byStatus: {} };
function checkResponse(path, body, r) {
  stats.total++;
  stats.byStatus[r.status] = (stats.byStatus[r.status] || 0) + 1;
  const ctx = `${path} ${String(body).slice(0, 300)} -> ${r.status} ${r.text.slice(0, 300)}`;
  assert.ok(r.status < 500, `5xx: ${ctx}`);
  const anthropic = path.startsWith("/v1/messages");
  if (r.status >= 400) {
    assert.ok(r.json, `error body is not JSON: ${ctx}`);
    if (anthropic) assert.ok(r.json.type === "error" && r.json.error?.message, `bad Anthropic error: ${ctx}`);
    else assert.ok(r.json.error?.message && r.json.error?.type, `bad OpenAI error: ${ctx}`);
    return;
  }
  assert.equal(r.status, 200, ctx);
  const ct = r.headers.get("content-type") || "";
  if (ct.startsWith("text/event-stream")) {
    const events = parseSse(r.text);
    if (anthropic) {
      assert.equal(events[0].event, "message_start", ctx);
      assert.equal(events.at(-1).event, "message_stop", ctx);
    } else {
      assert.equal(events.at(-1).data, "[DONE]", ctx);
      for (const e of events.slice(0, -1)) assert.ok(e.data.choices || e.data.error, ctx);
    }
  } else {
    assert.ok(r.json, `success body is not JSON: ${ctx}`);
    if (path.endsWith("count_tokens")) assert.equal(typeof r.json.input_tokens, "number", ctx);
    else if (anthropic) assert.ok(Array.isArray(r.json.content), ctx);
    else assert.ok(Array.isArray(r.json.choices) && r.json.usage, ctx);
  }
}

let next = 0, failures = 0;
async function worker() {
  while (next < N) {
    const i = next++;
    const [path, body] = seeds[i % seeds.length];
    const mutated = i < seeds.length ? JSON.stringify(body) : mutate(body);
    try {
      const r = await post(path, mutated, { raw: true });
      checkResponse(path, mutated, r);
    } catch (e) {
      failures++;
      if (failures <= 10) console.log(`FAIL #${i}: ${e.message}`);
    }
  }
}
const t0 = Date.now();
await Promise.all(Array.from({ length: CONCURRENCY }, worker));
const health = await get("/health", { key: "" });
assert.equal(health.status, 200, "the server is still up");
await assertNoLeaks("after fuzzing");
console.log(`fuzz: ${stats.total} requests in ${((Date.now() - t0) / 1000).toFixed(1)} s, by status ${JSON.stringify(stats.byStatus)}, ${failures} failures`);
if (failures) process.exitCode = 1;
