// End-to-end with the official clients (openai, @anthropic-ai/sdk) against `vela serve` on the
// tiny random Qwen3-vocabulary model: chat, completions, streaming, tools (streamed and not),
// logprobs, n > 1, stop sequences, count_tokens, and every error class. A random model says
// arbitrary things, so outputs are steered with logit_bias and checked for shape and consistency.
import assert from "node:assert/strict";
import { OpenAI, Anthropic, URL_, KEY, MODEL, TOK, TOOL_STEERING, post, get, parseSse, assertOpenAIError,
         assertAnthropicError, assertNoLeaks } from "./common.mjs";

const openai = new OpenAI({ baseURL: URL_ + "/v1", apiKey: KEY, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: URL_, apiKey: KEY, maxRetries: 0 });
const user = (content) => [{ role: "user", content }];
const weatherTool = {
  type: "function",
  function: { name: "get_weather", description: "Weather for a city",
              parameters: { type: "object", properties: { city: { type: "string" } } } },
};
let n_checks = 0;
async function check(name, fn) {
  try { await fn(); n_checks++; console.log(`ok   ${name}`); }
  catch (e) { console.log(`FAIL ${name}\n${e.stack}`); process.exitCode = 1; }
}

await check("models.list", async () => {
  const models = await openai.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
});

await check("chat: non-streaming, usage, seeded reproducibility", async () => {
  const req = { model: MODEL, messages: user("Hello!"), max_tokens: 8, seed: 42, temperature: 0.9 };
  const a = await openai.chat.completions.create(req);
  const b = await openai.chat.completions.create(req);
  assert.equal(a.object, "chat.completion");
  assert.equal(a.choices.length, 1);
  assert.equal(a.choices[0].message.role, "assistant");
  assert.equal(a.choices[0].finish_reason, "length");
  assert.equal(a.usage.completion_tokens, 8);
  assert.ok(a.usage.prompt_tokens > 3);
  assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + 8);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content, "same seed, same text");
});

await check("chat: streaming equals non-streaming (greedy), include_usage", async () => {
  const req = { model: MODEL, messages: [{ role: "system", content: "Be brief." }, ...user("Hi")],
                max_tokens: 12, temperature: 0 };
  const full = await openai.chat.completions.create(req);
  const stream = await openai.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, first = true;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (first) { assert.equal(c.delta.role, "assistant"); first = false; }
      text += c.delta.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, full.choices[0].message.content);
  assert.equal(finish, "length");
  assert.equal(usage.prompt_tokens, full.usage.prompt_tokens);
  assert.equal(usage.completion_tokens, full.usage.completion_tokens);
  assert.ok(usage.prompt_tokens_details.cached_tokens > 0, "the repeated prompt hit the prefix cache");
});

await check("chat: content parts, developer role, multi-turn with tool results", async () => {
  const r = await openai.chat.completions.create({
    model: MODEL, max_tokens: 4, tools: [weatherTool],
    messages: [
      { role: "developer", content: "You are helpful." },
      { role: "user", content: [{ type: "text", text: "Weather in " }, { type: "text", text: "Paris?" }] },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
        function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }] },
      { role: "tool", tool_call_id: "call_1", content: "{\"temp\": 21}" },
    ],
  });
  assert.equal(r.choices.length, 1);
  assert.ok(r.usage.prompt_tokens > 40, "the tools and history are in the prompt");
});

await check("chat: logprobs + top_logprobs", async () => {
  const r = await openai.chat.completions.create({ model: MODEL, messages: user("Hi"), max_tokens: 5,
                                                   logprobs: true, top_logprobs: 3, temperature: 0 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 5);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    assert.equal(t.top_logprobs[0].token, t.token, "greedy picks the top token");
    assert.ok(Array.isArray(t.bytes));
  }
  assert.equal(lp.map((t) => t.token).join(""), r.choices[0].message.content);
});

await check("chat: n = 3 with a seed", async () => {
  const r = await openai.chat.completions.create({ model: MODEL, messages: user("Tell me"), n: 3,
                                                   max_tokens: 6, seed: 7 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(r.usage.completion_tokens, 18);
  const stream = await openai.chat.completions.create({ model: MODEL, messages: user("Tell me"), n: 3,
                                                        max_tokens: 6, seed: 7, stream: true });
  const texts = ["", "", ""], finishes = [null, null, null];
  for await (const chunk of stream)
    for (const c of chunk.choices) { texts[c.index] += c.delta.content ?? ""; if (c.finish_reason) finishes[c.index] = c.finish_reason; }
  assert.deepEqual(texts, r.choices.map((c) => c.message.content), "seeded n>1 streams the same samples");
  assert.deepEqual(finishes, ["length", "length", "length"]);
});

await check("chat: stop sequences (steered output ' hello hello ...')", async () => {
  const base = { model: MODEL, messages: user("x"), max_tokens: 10, temperature: 0,
                 logit_bias: { [TOK.hello]: 100 } };
  const free = await openai.chat.completions.create(base);
  assert.equal(free.choices[0].message.content, " hello".repeat(10));
  const r = await openai.chat.completions.create({ ...base, stop: ["lo h"] });
  assert.equal(r.choices[0].message.content, " hel");
  assert.equal(r.choices[0].finish_reason, "stop");
  const s = await openai.chat.completions.create({ ...base, stop: "lo h", stream: true });
  let text = "", finish = null;
  for await (const chunk of s) for (const c of chunk.choices) { text += c.delta.content ?? ""; finish = c.finish_reason ?? finish; }
  assert.equal(text, " hel");
  assert.equal(finish, "stop");
});

await check("chat: tool call, non-streaming (tool_choice names the function)", async () => {
  const r = await openai.chat.completions.create({
    model: MODEL, messages: user("Weather in Paris?"), tools: [weatherTool], max_tokens: 8,
    tool_choice: { type: "function", function: { name: "get_weather" } }, ...TOOL_STEERING });
  const c = r.choices[0];
  assert.equal(c.finish_reason, "tool_calls");
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.equal(call.type, "function");
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), {});
  assert.match(call.id, /^call_/);
});

await check("chat: tool call, streamed as incremental deltas", async () => {
  const stream = await openai.chat.completions.create({
    model: MODEL, messages: user("Weather in Paris?"), tools: [weatherTool], max_tokens: 8, stream: true,
    tool_choice: { type: "function", function: { name: "get_weather" } }, ...TOOL_STEERING });
  const calls = [];
  let finish = null, n_arg_deltas = 0;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      for (const d of c.delta.tool_calls ?? []) {
        if (d.id) calls[d.index] = { id: d.id, name: d.function.name, arguments: d.function.arguments ?? "" };
        else { calls[d.index].arguments += d.function.arguments; n_arg_deltas++; }
      }
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(finish, "tool_calls");
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, "get_weather");
  assert.deepEqual(JSON.parse(calls[0].arguments), {});
  assert.ok(n_arg_deltas >= 1, "arguments arrived after the name");
  // The SDK's own accumulator agrees.
  const runner = openai.chat.completions.stream({
    model: MODEL, messages: user("Weather?"), tools: [weatherTool], max_tokens: 8,
    tool_choice: { type: "function", function: { name: "get_weather" } }, ...TOOL_STEERING });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.tool_calls[0].function.name, "get_weather");
  assert.equal(final.choices[0].message.tool_calls[0].function.arguments, "{}");
});

await check("chat: tool_choice none / auto accepted; unknown named function rejected", async () => {
  for (const tool_choice of ["none", "auto"]) {
    const r = await openai.chat.completions.create({ model: MODEL, messages: user("x"), tools: [weatherTool],
                                                     tool_choice, max_tokens: 3 });
    assert.equal(r.choices.length, 1);
  }
  const bad = await post("/v1/chat/completions", { messages: user("x"), tools: [weatherTool],
    tool_choice: { type: "function", function: { name: "nope" } } });
  assertOpenAIError(bad, 400);
});

await check("completions: string, list, token ids, logprobs, streaming, echo", async () => {
  const a = await openai.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 5,
                                              temperature: 0, logprobs: 2 });
  assert.equal(a.object, "text_completion");
  assert.equal(a.choices[0].logprobs.tokens.length, 5);
  assert.equal(a.choices[0].logprobs.tokens.join(""), a.choices[0].text);
  assert.equal(Object.keys(a.choices[0].logprobs.top_logprobs[0]).length, 2);
  const ids = await openai.completions.create({ model: MODEL, prompt: [12522, 5193, 264, 882], max_tokens: 5, temperature: 0 });
  assert.equal(ids.usage.prompt_tokens, 4);
  const multi = await openai.completions.create({ model: MODEL, prompt: ["a", "b c"], max_tokens: 3, n: 2, seed: 1 });
  assert.deepEqual(multi.choices.map((c) => c.index), [0, 1, 2, 3]);
  assert.equal(multi.usage.completion_tokens, 12);
  const s = await openai.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 5,
                                              temperature: 0, stream: true });
  let text = "";
  for await (const chunk of s) text += chunk.choices[0]?.text ?? "";
  assert.equal(text, a.choices[0].text);
  const e = await openai.completions.create({ model: MODEL, prompt: "Echo me", max_tokens: 2, echo: true });
  assert.ok(e.choices[0].text.startsWith("Echo me"));
  const stop = await openai.completions.create({ model: MODEL, prompt: "x", max_tokens: 10, temperature: 0,
                                                 logit_bias: { [TOK.hello]: 100 }, stop: ["lo h"] });
  assert.equal(stop.choices[0].text, " hel");
  assert.equal(stop.choices[0].finish_reason, "stop");
});

await check("anthropic: messages.create, system, usage, stop_sequences", async () => {
  const m = await anthropic.messages.create({ model: MODEL, max_tokens: 6, system: "Be brief.",
                                              messages: user("Hello") });
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.equal(m.stop_reason, "max_tokens");
  assert.equal(m.usage.output_tokens, 6);
  assert.equal(m.content[0].type, "text");
  const s = await anthropic.messages.create({ model: MODEL, max_tokens: 10, messages: user("x"), temperature: 0,
                                              stop_sequences: ["lo h"], logit_bias: { [TOK.hello]: 100 } });
  assert.equal(s.stop_reason, "stop_sequence");
  assert.equal(s.stop_sequence, "lo h");
  assert.equal(s.content[0].text, " hel");
  const eos = await anthropic.messages.create({ model: MODEL, max_tokens: 10, messages: user("x"), temperature: 0,
                                                logit_bias: { [TOK.imEnd]: 100 } });
  assert.equal(eos.stop_reason, "end_turn");
  assert.equal(eos.usage.output_tokens, 1);
});

await check("anthropic: streaming event sequence and finalMessage", async () => {
  const stream = anthropic.messages.stream({ model: MODEL, max_tokens: 8, temperature: 0,
                                             messages: [{ role: "user", content: [{ type: "text", text: "Hi" }] }] });
  const events = [];
  stream.on("streamEvent", (e) => events.push(e.type));
  const final = await stream.finalMessage();
  const full = await anthropic.messages.create({ model: MODEL, max_tokens: 8, temperature: 0, messages: user("Hi") });
  assert.equal(final.content[0].text, full.content[0].text);
  assert.equal(final.stop_reason, "max_tokens");
  assert.equal(events[0], "message_start");
  assert.equal(events.at(-1), "message_stop");
  assert.equal(events.at(-2), "message_delta");
  assert.ok(events.includes("content_block_start") && events.includes("content_block_stop"));
  // Raw wire format: every event is named and its data's type matches the name.
  const raw = await post("/v1/messages", { model: MODEL, max_tokens: 4, stream: true, messages: user("Hi") },
                         { headers: { "x-api-key": KEY }, key: "" });
  for (const ev of parseSse(raw.text)) assert.equal(ev.data.type, ev.event);
});

await check("anthropic: tool_use (non-streaming and streaming), tool_result turn", async () => {
  const tools = [{ name: "get_weather", description: "Weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }];
  const req = { model: MODEL, max_tokens: 8, tools, tool_choice: { type: "tool", name: "get_weather" },
                messages: user("Weather in Paris?"), ...TOOL_STEERING };
  const m = await anthropic.messages.create(req);
  assert.equal(m.stop_reason, "tool_use");
  const use = m.content.find((b) => b.type === "tool_use");
  assert.equal(use.name, "get_weather");
  assert.deepEqual(use.input, {});
  assert.match(use.id, /^toolu_/);
  const final = await anthropic.messages.stream(req).finalMessage();
  assert.equal(final.stop_reason, "tool_use");
  assert.deepEqual(final.content.find((b) => b.type === "tool_use").input, {});
  const next = await anthropic.messages.create({ model: MODEL, max_tokens: 3, tools, messages: [
    ...user("Weather in Paris?"),
    { role: "assistant", content: [{ type: "tool_use", id: use.id, name: "get_weather", input: { city: "Paris" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "21 C" }] }] });
  assert.equal(next.type, "message");
});

await check("anthropic: count_tokens matches the prompt the model sees", async () => {
  const req = { model: MODEL, system: "Be brief.", messages: user("How many tokens is this?") };
  const c = await anthropic.messages.countTokens(req);
  const m = await anthropic.messages.create({ ...req, max_tokens: 1 });
  assert.equal(c.input_tokens, m.usage.input_tokens);
});

// ---- every error class ----------------------------------------------------------------------
await check("errors: OpenAI SDK error classes", async () => {
  const cases = [
    [{ model: MODEL, messages: [] }, OpenAI.BadRequestError, "empty messages"],
    [{ model: MODEL, messages: [{ role: "wizard", content: "x" }] }, OpenAI.BadRequestError, "unknown role"],
    [{ model: MODEL, messages: [{ role: "user", content: 42 }] }, OpenAI.BadRequestError, "wrong content type"],
    [{ model: MODEL, messages: user("x"), max_tokens: -5 }, OpenAI.BadRequestError, "negative max_tokens"],
    [{ model: MODEL, messages: user("x"), temperature: "hot" }, OpenAI.BadRequestError, "wrong type"],
    [{ model: MODEL, messages: user("x"), top_p: 7 }, OpenAI.BadRequestError, "out of range"],
    [{ model: MODEL, messages: user("x"), logit_bias: { "999999999": 1 } }, OpenAI.BadRequestError, "bias outside vocab"],
    [{ model: MODEL, messages: user("x"), n: 1000 }, OpenAI.BadRequestError, "n too large"],
    [{ model: MODEL, messages: user("x ".repeat(3000)) }, OpenAI.BadRequestError, "prompt longer than the context"],
    [{ model: MODEL, messages: user("x"), max_tokens: 100000 }, OpenAI.BadRequestError, "max_tokens past the context"],
    [{ model: "gpt-9", messages: user("x") }, OpenAI.NotFoundError, "unknown model"],
  ];
  for (const [body, cls, what] of cases) {
    await assert.rejects(openai.chat.completions.create(body), (e) => {
      assert.ok(e instanceof cls, `${what}: got ${e.constructor.name} ${e.status} ${e.message}`);
      assert.ok(e.error?.message, `${what}: error message`);
      return true;
    }, what);
  }
  const long = await post("/v1/chat/completions", { messages: user("x ".repeat(3000)) });
  assert.equal(long.json.error.code, "context_length_exceeded");
  const bad = new OpenAI({ baseURL: URL_ + "/v1", apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: MODEL, messages: user("x") }), OpenAI.AuthenticationError);
  await assert.rejects(openai.completions.create({ model: MODEL, prompt: [] }), OpenAI.BadRequestError);
  await assert.rejects(openai.completions.create({ model: MODEL, prompt: [999999999] }), OpenAI.BadRequestError);
});

await check("errors: raw HTTP (invalid JSON, wrong body type, size limit, routes, auth)", async () => {
  assertOpenAIError(await post("/v1/chat/completions", "{not json", { raw: true }), 400);
  assertOpenAIError(await post("/v1/chat/completions", "[1,2]", { raw: true }), 400);
  assertOpenAIError(await post("/v1/chat/completions", "", { raw: true }), 400);
  // Nesting deep enough to overflow a recursive parser or printer: refused before parsing.
  const deep = "[".repeat(100000) + "]".repeat(100000);
  assertOpenAIError(await post("/v1/chat/completions", `{"model": ${deep}}`, { raw: true }), 400);
  assertAnthropicError(await post("/v1/messages", deep, { raw: true }), 400);
  assertOpenAIError(await post("/v1/chat/completions", JSON.stringify({ messages: user("x".repeat(2 << 20)) }), { raw: true }), 413);
  assertOpenAIError(await post("/v1/nope", {}), 404);
  assertOpenAIError(await post("/v1/chat/completions", { messages: user("x") }, { key: "" }), 401);
  assertOpenAIError(await get("/v1/models", { key: "" }), 401);
  assertOpenAIError(await get("/metrics", { key: "wrong" }), 401);
  assert.equal((await get("/health", { key: "" })).status, 200, "/health is open");
  assertAnthropicError(await post("/v1/messages", { messages: user("x") }), 400);  // no max_tokens
  assertAnthropicError(await post("/v1/messages", { max_tokens: 5, messages: [] }), 400);
  assertAnthropicError(await post("/v1/messages", { max_tokens: 5, messages: [{ role: "system", content: "x" }] }), 400);
  assertAnthropicError(await post("/v1/messages", { model: "claude-9", max_tokens: 5, messages: user("x") }), 404);
  assertAnthropicError(await post("/v1/messages", "{", { raw: true }), 400);
  assertAnthropicError(await post("/v1/messages", { max_tokens: 5, messages: user("x") }, { key: "" }), 401);
  assertAnthropicError(await post("/v1/messages/count_tokens", { messages: 3 }), 400);
});

await check("errors: Anthropic SDK error classes", async () => {
  await assert.rejects(anthropic.messages.create({ model: MODEL, max_tokens: 5, messages: [] }), Anthropic.BadRequestError);
  await assert.rejects(anthropic.messages.create({ model: MODEL, max_tokens: -1, messages: user("x") }), Anthropic.BadRequestError);
  await assert.rejects(anthropic.messages.create({ model: "claude-x", max_tokens: 5, messages: user("x") }), Anthropic.NotFoundError);
  const bad = new Anthropic({ baseURL: URL_, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.messages.create({ model: MODEL, max_tokens: 5, messages: user("x") }), Anthropic.AuthenticationError);
});

await check("metrics and stats", async () => {
  const m = await get("/metrics");
  assert.equal(m.status, 200);
  for (const name of ["vela_requests_total", "vela_prompt_tokens_total", "vela_generation_tokens_total",
                      "vela_time_to_first_token_seconds_bucket", "vela_inter_token_latency_seconds_bucket",
                      "vela_num_requests_waiting", "vela_num_requests_running", "vela_kv_cache_usage_ratio",
                      "vela_prefix_cache_hit_tokens_total"])
    assert.ok(m.text.includes(name), `missing ${name}`);
  assert.match(m.text, /vela_requests_total\{route="\/v1\/chat\/completions",status="200"\} \d+/);
  assert.match(m.text, /vela_requests_total\{route="\/v1\/chat\/completions",status="400"\} \d+/);
  const s = await assertNoLeaks("after the client tests");
  assert.ok(s.latency.ttft_s.count > 10);
  assert.ok(s.engine.prefix_hit_tokens > 0, "repeated prompts hit the prefix cache");
});

console.log(`${n_checks} checks passed${process.exitCode ? " (with failures)" : ""}`);
