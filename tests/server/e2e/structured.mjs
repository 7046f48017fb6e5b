// Structured output end-to-end against `vela serve` on the tiny random Qwen3-vocabulary model:
// the official OpenAI client's chat.completions.parse with a zod schema (zodResponseFormat),
// response_format json_object / json_schema, vLLM's guided_regex / guided_choice / guided_json on
// both endpoints, tool_choice required / named (OpenAI) and any / tool (Anthropic) with arguments
// validated by ajv against the tool's schema, strict tools under tool_choice auto (a lazily
// triggered grammar; n > 1, streaming, stop strings, both APIs), and bad schemas answered 400
// naming the construct.
// A random model writes arbitrary allowed tokens: a logit_bias on '"' and '}' keeps strings and
// objects short; validity comes from the grammar alone.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { OpenAI, Anthropic, URL_, KEY, MODEL, post } from "./common.mjs";

const require = createRequire((process.env.NODE_PATH || ".") + "/");
const { z } = require("zod");
const { zodResponseFormat } = require("openai/helpers/zod");
const Ajv2020 = require("ajv/dist/2020").default;
const ajv = new Ajv2020({ strict: false });

const openai = new OpenAI({ baseURL: URL_ + "/v1", apiKey: KEY, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: URL_, apiKey: KEY, maxRetries: 0 });
const user = (content) => [{ role: "user", content }];
const QUOTE = 1, CLOSE = 92;  // '"' and '}' in the Qwen3 vocabulary
const STEER = { temperature: 0.8, logit_bias: { [QUOTE]: 15, [CLOSE]: 8 } };
let n_checks = 0;
async function check(name, fn) {
  try { await fn(); n_checks++; console.log(`ok   ${name}`); }
  catch (e) { console.log(`FAIL ${name}\n${e.stack}`); process.exitCode = 1; }
}

const Weather = z.object({
  city: z.string(),
  days: z.number().int(),
  unit: z.enum(["celsius", "fahrenheit"]),
  alerts: z.array(z.string()).max(2),
  detail: z.object({ wind: z.boolean(), note: z.string().nullable() }),
});

await check("chat.completions.parse with a zod schema (n = 3, seeded)", async () => {
  const r = await openai.chat.completions.parse({
    model: MODEL, messages: user("Weather in Paris?"), max_tokens: 400, n: 3, seed: 7, ...STEER,
    response_format: zodResponseFormat(Weather, "weather"),
  });
  assert.equal(r.choices.length, 3);
  for (const c of r.choices) {
    assert.equal(c.finish_reason, "stop", c.message.content);
    const p = c.message.parsed;  // the client ran JSON.parse and zod's parse
    assert.ok(p, "parsed is set");
    assert.equal(typeof p.city, "string");
    assert.ok(Number.isInteger(p.days));
    assert.ok(["celsius", "fahrenheit"].includes(p.unit));
    assert.ok(Weather.safeParse(p).success);
  }
});

await check("response_format json_object and json_schema (strict)", async () => {
  const a = await openai.chat.completions.create({
    model: MODEL, messages: user("JSON please"), max_tokens: 300, seed: 1, ...STEER,
    response_format: { type: "json_object" },
  });
  const v = JSON.parse(a.choices[0].message.content);
  assert.equal(typeof v, "object");
  assert.ok(!Array.isArray(v) && v !== null);
  const schema = { type: "object", properties: { ok: { type: "boolean" }, n: { type: "integer", minimum: 3, maximum: 9 } },
                   required: ["ok", "n"], additionalProperties: false };
  const b = await openai.chat.completions.create({
    model: MODEL, messages: user("x"), max_tokens: 200, seed: 2, ...STEER,
    response_format: { type: "json_schema", json_schema: { name: "t", strict: true, schema } },
  });
  assert.ok(ajv.validate(schema, JSON.parse(b.choices[0].message.content)), b.choices[0].message.content);
});

await check("guided_regex / guided_choice (chat) and guided_json (completions)", async () => {
  const re = await openai.chat.completions.create({
    model: MODEL, messages: user("phone"), max_tokens: 30, temperature: 1, guided_regex: "\\d{3}-\\d{4}",
  });
  assert.match(re.choices[0].message.content, /^\d{3}-\d{4}$/);
  const ch = await openai.chat.completions.create({
    model: MODEL, messages: user("pick"), max_tokens: 10, temperature: 1, guided_choice: ["alpha", "beta"],
  });
  assert.ok(["alpha", "beta"].includes(ch.choices[0].message.content));
  const schema = { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 };
  const c = await openai.completions.create({
    model: MODEL, prompt: "list:", max_tokens: 100, seed: 3, ...STEER, guided_json: schema,
  });
  assert.ok(ajv.validate(schema, JSON.parse(c.choices[0].text)), c.choices[0].text);
});

const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather for a city", strict: true,
    parameters: { type: "object", properties: { city: { type: "string" }, unit: { enum: ["c", "f"] } },
                  required: ["city", "unit"], additionalProperties: false } } },
  { type: "function", function: { name: "add", description: "Add two integers",
    parameters: { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } },
                  required: ["a", "b"], additionalProperties: false } } },
];
const toolSchema = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));

await check("tool_choice required and named: arguments valid against the tool schema", async () => {
  for (const seed of [1, 2, 3, 4]) {
    const r = await openai.chat.completions.create({
      model: MODEL, messages: user("Use a tool."), tools, tool_choice: "required", max_tokens: 200, seed, ...STEER,
    });
    const calls = r.choices[0].message.tool_calls;
    assert.ok(calls && calls.length >= 1, JSON.stringify(r.choices[0].message));
    for (const tc of calls) {
      const schema = toolSchema[tc.function.name];
      assert.ok(schema, `unknown tool ${tc.function.name}`);
      assert.ok(ajv.validate(schema, JSON.parse(tc.function.arguments)), tc.function.arguments);
    }
    assert.equal(r.choices[0].finish_reason, "tool_calls");
  }
  const named = await openai.chat.completions.create({
    model: MODEL, messages: user("Add."), tools, max_tokens: 200, seed: 5, ...STEER,
    tool_choice: { type: "function", function: { name: "add" } },
  });
  const tc = named.choices[0].message.tool_calls[0];
  assert.equal(tc.function.name, "add");
  assert.ok(ajv.validate(toolSchema.add, JSON.parse(tc.function.arguments)), tc.function.arguments);
});

await check("anthropic tool_choice any / tool: input valid against input_schema", async () => {
  const atools = tools.map((t) => ({ name: t.function.name, description: t.function.description,
                                     input_schema: t.function.parameters }));
  for (const tool_choice of [{ type: "any" }, { type: "tool", name: "get_weather" }]) {
    const m = await anthropic.messages.create({
      model: MODEL, max_tokens: 200, messages: user("Use a tool."), tools: atools, tool_choice,
      temperature: 0.8, logit_bias: STEER.logit_bias,
    });
    const use = m.content.find((b) => b.type === "tool_use");
    assert.ok(use, JSON.stringify(m.content));
    if (tool_choice.name) assert.equal(use.name, tool_choice.name);
    assert.ok(ajv.validate(toolSchema[use.name], use.input), JSON.stringify(use.input));
    assert.equal(m.stop_reason, "tool_use");
  }
});

// Strict tools under tool_choice auto: a lazy grammar, inactive until the model writes
// <tool_call> (a logit_bias on that token makes the random model open a call at once). The tools'
// arguments hold no free strings (there the biased <tool_call> token would be valid text forever).
const TOOL_CALL = 151657;  // <tool_call> in the Qwen3 vocabulary
const strictTools = [
  { type: "function", function: { name: "forecast", strict: true,
    parameters: { type: "object", properties: { unit: { enum: ["c", "f"] }, days: { type: "integer", minimum: 1, maximum: 14 },
                                                 hourly: { type: "boolean" } },
                  required: ["unit", "days", "hourly"], additionalProperties: false } } },
  { type: "function", function: { name: "pick", strict: true,
    parameters: { type: "object", properties: { ids: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 },
                                                 mode: { anyOf: [{ const: "all" }, { type: "null" }] } },
                  required: ["ids", "mode"], additionalProperties: false } } },
];
const strictSchema = Object.fromEntries(strictTools.map((t) => [t.function.name, t.function.parameters]));
const AUTO_STEER = { temperature: 1, logit_bias: { [TOOL_CALL]: 25, [CLOSE]: 6 } };
function checkCalls(calls, where) {
  assert.ok(calls && calls.length >= 1, where);
  for (const tc of calls) {
    const schema = strictSchema[tc.function.name];
    assert.ok(schema, `unknown tool ${tc.function.name}`);
    assert.ok(ajv.validate(schema, JSON.parse(tc.function.arguments)), tc.function.arguments);
  }
}

await check("strict tools under tool_choice auto: lazily constrained calls (n = 2, 8 seeds, T = 1)", async () => {
  let n_calls = 0;
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    const r = await openai.chat.completions.create({
      model: MODEL, messages: user("Use a tool if you like."), tools: strictTools, max_tokens: 1500, seed, n: 2,
      parallel_tool_calls: seed % 2 === 0, stop: ["never-appears"], ...AUTO_STEER,
    });
    for (const c of r.choices) {
      assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c));
      checkCalls(c.message.tool_calls, JSON.stringify(c.message));
      if (seed % 2 === 1) assert.equal(c.message.tool_calls.length, 1);
      n_calls += c.message.tool_calls.length;
    }
  }
  assert.ok(n_calls >= 16);
  // Unbiased, the model writes free text (the grammar then only keeps out a broken call).
  const free = await openai.chat.completions.create({
    model: MODEL, messages: user("Hi"), tools: strictTools, max_tokens: 20, seed: 3, temperature: 1,
  });
  const m = free.choices[0].message;
  if (m.tool_calls) checkCalls(m.tool_calls, JSON.stringify(m));
  else assert.equal(typeof m.content, "string");
});

await check("strict tools under tool_choice auto, streamed: the deltas rebuild valid calls", async () => {
  const stream = await openai.chat.completions.create({
    model: MODEL, messages: user("Use a tool."), tools: strictTools, max_tokens: 1500, seed: 11, stream: true,
    ...AUTO_STEER,
  });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    for (const d of ch.delta.tool_calls || []) {
      calls[d.index] ??= { function: { name: "", arguments: "" } };
      if (d.function?.name) calls[d.index].function.name += d.function.name;
      if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
    }
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  assert.equal(finish, "tool_calls");
  checkCalls(calls, "stream");
});

await check("anthropic strict tools under tool_choice auto: tool_use input valid", async () => {
  const atools = strictTools.map((t) => ({ name: t.function.name, input_schema: t.function.parameters, strict: true }));
  for (const seed of [1, 2, 3]) {
    const m = await anthropic.messages.create({
      model: MODEL, max_tokens: 1500, messages: user("Use a tool."), tools: atools,
      tool_choice: { type: "auto", disable_parallel_tool_use: true }, seed, ...AUTO_STEER,
    });
    const uses = m.content.filter((b) => b.type === "tool_use");
    assert.equal(uses.length, 1, JSON.stringify(m.content));
    assert.ok(ajv.validate(strictSchema[uses[0].name], uses[0].input), JSON.stringify(uses[0].input));
    assert.equal(m.stop_reason, "tool_use");
  }
});

await check("bad schemas and grammars: 400 naming the construct", async () => {
  const cases = [
    [{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { a: { not: {} } } } } } }, "unsupported keyword 'not'"],
    [{ guided_regex: "(a)\\1" }, "backreferences"],
    [{ guided_grammar: "root ::= root \"a\"" }, "left-recursive"],
    [{ response_format: { type: "yaml" } }, "response_format.type"],
  ];
  for (const [extra, text] of cases) {
    const r = await post("/v1/chat/completions", { model: MODEL, messages: user("x"), max_tokens: 4, ...extra });
    assert.equal(r.status, 400, JSON.stringify(r.json));
    assert.ok(r.json.error.message.includes(text), r.json.error.message);
  }
});

console.log(`${n_checks} checks passed`);
