// Shared helpers for the server e2e drivers: the server's address and key from the environment,
// assertions that name what failed, SSE parsing, token ids of the Qwen3 vocabulary the fixture
// model uses (for logit_bias steering of a random model), and percentiles.
import assert from "node:assert/strict";
import { createRequire } from "node:module";

// ES modules ignore NODE_PATH; the clients live in .cache/assets/node_modules.
const require = createRequire((process.env.NODE_PATH || ".") + "/");
const load = (name) => { const m = require(name); return m.default ?? m; };
export const OpenAI = load("openai");
export const Anthropic = load("@anthropic-ai/sdk");

export const URL_ = process.env.VELA_URL;
export const KEY = process.env.VELA_API_KEY;
export const MODEL = process.env.VELA_MODEL;

// Qwen3 token ids (tokenizer.json of Qwen3): "{}", "}", "</tool_call>", "<|im_end|>", " hello".
export const TOK = { braces: 6257, close: 92, toolCallEnd: 151658, imEnd: 151645, hello: 23811 };

// Makes a random model emit `<tool_call>` arguments "{}" then "}" "</tool_call>" and end the turn:
// with tool_choice naming the function, the prompt already holds `{"name": ..., "arguments": `;
// strictly decreasing biases plus frequency_penalty 2 walk the four tokens in order (greedy).
export const TOOL_STEERING = {
  temperature: 0,
  frequency_penalty: 2,
  logit_bias: { [TOK.braces]: 100, [TOK.close]: 99.5, [TOK.toolCallEnd]: 99, [TOK.imEnd]: 98.5 },
};

export async function post(path, body, { key = KEY, raw = false, headers = {} } = {}) {
  const h = { "Content-Type": "application/json", ...headers };
  if (key) h["Authorization"] = `Bearer ${key}`;
  const res = await fetch(URL_ + path, { method: "POST", headers: h, body: raw ? body : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* SSE or not JSON */ }
  return { status: res.status, headers: res.headers, text, json };
}

export async function get(path, { key = KEY } = {}) {
  const h = key ? { Authorization: `Bearer ${key}` } : {};
  const res = await fetch(URL_ + path, { headers: h });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { }
  return { status: res.status, text, json };
}

// Parses an SSE body into [{event, data}] (data parsed as JSON unless "[DONE]").
export function parseSse(text) {
  const out = [];
  for (const block of text.split("\n\n")) {
    if (!block.trim()) continue;
    let event = null, data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
      else if (line.startsWith(":")) continue;
      else throw new Error(`malformed SSE line: ${JSON.stringify(line)}`);
    }
    out.push({ event, data: data === "[DONE]" ? "[DONE]" : JSON.parse(data) });
  }
  return out;
}

// Checks an OpenAI error body: {"error": {"message", "type", ...}}.
export function assertOpenAIError(r, status) {
  assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${r.text.slice(0, 300)}`);
  assert.ok(r.json && r.json.error && typeof r.json.error.message === "string" && r.json.error.message.length > 0,
            `no OpenAI error object: ${r.text.slice(0, 300)}`);
  assert.equal(typeof r.json.error.type, "string");
}

export function assertAnthropicError(r, status) {
  assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${r.text.slice(0, 300)}`);
  assert.equal(r.json?.type, "error", r.text.slice(0, 300));
  assert.equal(typeof r.json.error?.type, "string");
  assert.ok(r.json.error.message.length > 0);
}

export function percentile(values, q) {
  if (!values.length) return 0;
  const v = [...values].sort((a, b) => a - b);
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil(q * v.length) - 1))];
}

export function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

// Waits until the engine is idle, then checks that no KV page is held by anything but the prefix
// cache (no leak) and the page accounting adds up.
export async function assertNoLeaks(label) {
  let s;
  for (let i = 0; i < 200; i++) {
    s = (await get("/stats")).json;
    if (s.engine.running === 0 && s.engine.waiting === 0 && s.server.in_flight === 0) break;
    await sleep(50);
  }
  const e = s.engine;
  assert.equal(e.running, 0, `${label}: requests still running`);
  assert.equal(e.waiting, 0, `${label}: requests still waiting`);
  assert.equal(s.server.in_flight, 0, `${label}: HTTP requests still in flight`);
  assert.equal(e.kv_pages_used, e.kv_pages_cached, `${label}: ${e.kv_pages_used - e.kv_pages_cached} KV pages leaked`);
  assert.equal(e.kv_pages_used + e.kv_pages_free, e.kv_pages_total, `${label}: page accounting`);
  const checked = (await get("/stats?check=1")).json;
  assert.equal(checked.kv_integrity, "ok", `${label}: KV cache integrity: ${checked.kv_integrity}`);
  return s;
}
