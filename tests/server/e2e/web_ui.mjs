// The web chat page in headless Chromium, driven over the DevTools protocol (node's WebSocket),
// against a `vela serve` that requires an API key. In order: the page loads and asks for the key;
// the key typed into Settings unlocks /v1/models; the Markdown renderer and the code highlighter
// give the expected DOM for a known string (and escape HTML); the model card panel without and
// with a README.md (and GET /model-card's 401 / 404 / 200); a reply streamed on load
// (`/?prompt=...`) with token count and tokens/s; a second turn through the form; regenerate;
// edit; stop mid-stream; the conversation survives a reload; rename, new chat, delete; and at
// phone width the sidebar is a drawer (screenshots: WORK/web_ui_desktop.png, web_ui_dark.png,
// web_ui_phone.png, web_ui_phone_sidebar.png).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const URL_ = process.env.VELA_URL;
const KEY = process.env.VELA_API_KEY;
const MODEL_DIR = process.env.VELA_MODEL_DIR;
const WORK = process.env.VELA_WORK;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = Date.now();
const step = (what) => console.log(`web_ui: [${((Date.now() - t0) / 1000).toFixed(1)} s] ${what}`);
assert.ok(KEY, "the web_ui test expects a server with --api-key");

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "vela-chromium-"));
const readme = path.join(MODEL_DIR, "README.md");
const chromium = spawn(process.env.CHROMIUM, [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
  `--user-data-dir=${profile}`, "--remote-debugging-port=0", "about:blank",
], { stdio: ["ignore", "ignore", "pipe"] });
try {
  const wsBrowser = await new Promise((resolve, reject) => {
    let err = "";
    const timer = setTimeout(() => reject(new Error(`chromium did not start: ${err}`)), 30000);
    chromium.stderr.on("data", (d) => {
      err += d;
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
  });
  const devtools = new URL(wsBrowser).host;
  const target = await (await fetch(`http://${devtools}/json/new?about:blank`, { method: "PUT" })).json();
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((r, j) => { ws.onopen = r; ws.onerror = j; });
  let id = 0;
  const pending = new Map();
  const pageErrors = [];
  ws.onmessage = (m) => {
    const j = JSON.parse(m.data);
    if (j.method === "Runtime.exceptionThrown") pageErrors.push(j.params.exceptionDetails);
    if (pending.has(j.id)) { pending.get(j.id)(j); pending.delete(j.id); }
  };
  const cdp = (method, params = {}) => new Promise((resolve, reject) => {
    const i = ++id;
    pending.set(i, (j) => (j.error ? reject(new Error(`${method}: ${j.error.message}`)) : resolve(j.result)));
    ws.send(JSON.stringify({ id: i, method, params }));
  });
  const evaluate = async (expression) => {
    const r = await cdp("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`page: ${r.exceptionDetails.exception?.description || r.exceptionDetails.text}\n  in: ${expression}`);
    return r.result.value;
  };
  async function waitFor(label, expression, ms = 30000) {
    const end = Date.now() + ms;
    let v;
    while (Date.now() < end) {
      try { v = await evaluate(expression); } catch { v = undefined; }  // mid-navigation
      if (v) return v;
      await sleep(50);
    }
    throw new Error(`timed out waiting for ${label}: ${expression}`);
  }
  const status = () => evaluate(`(() => { const s = document.getElementById("status"); return { text: s.textContent, ...s.dataset }; })()`);
  const waitDone = async (label) => {
    await waitFor(`${label} to finish`, `["done", "error", "stopped"].includes(document.getElementById("status").dataset.state)`, 60000);
    return status();
  };
  const click = (selector) => evaluate(`(() => { const e = document.querySelector(${JSON.stringify(selector)}); if (!e) throw new Error("no element ${selector.replace(/"/g, "'")}"); e.click(); return true; })()`);
  const setField = (fieldId, value) => evaluate(`(() => { const e = document.getElementById("${fieldId}"); e.value = ${JSON.stringify(value)}; e.dispatchEvent(new Event("input")); return true; })()`);
  const nMsgs = () => evaluate(`document.querySelectorAll("#log .msg").length`);
  const goto = async (url) => {
    await evaluate(`window.__old = true`);
    await cdp("Page.navigate", { url });
    await waitFor("the page to load", `!window.__old && document.readyState === "complete" && !!window.vela`);
  };
  await cdp("Runtime.enable");
  await cdp("Page.enable");
  await cdp("Emulation.setDeviceMetricsOverride", { width: 1280, height: 860, deviceScaleFactor: 1, mobile: false });

  // 1. The page loads; without the key it says so, with the key from Settings it names the model.
  await goto(`${URL_}/`);
  await waitFor("the missing-key notice", `document.getElementById("model").textContent === "API key needed"`);
  await click("#settings-btn");
  await setField("s_api_key", KEY);
  await waitFor("the model name", `document.getElementById("model").textContent === "tiny-qwen3"`);
  await evaluate(`document.getElementById("settings").close(); true`);
  step("page loaded; the API key from Settings unlocks /v1/models");

  // 2. The Markdown renderer and highlighter on a known string, rendered into the page's DOM.
  const known = [
    "## Heading *two*", "", "Text with **bold**, _em_, ~~gone~~, `a<b>` and [a link](https://example.org/x_(y)).",
    "", "- one", "- two", "  1. nested", "", "> quoted **text**", "",
    "| name | n |", "|:-----|--:|", "| `x` | 1 |", "| y | 22 |", "",
    "```python", "def f(x):  # square", "    return x * 2 + 'ok'", "```", "",
    "<img src=x onerror=\"window.__xss=1\"> <script>window.__xss=2</script> [bad](javascript:window.__xss=3)",
  ].join("\n");
  const dom = await evaluate(`(() => {
    const d = document.createElement("div"); d.className = "md";
    d.innerHTML = vela.renderMarkdown(${JSON.stringify(known)});
    document.body.append(d);
    const q = (s) => [...d.querySelectorAll(s)];
    const r = {
      h2: q("h2").map((e) => e.innerHTML), strong: q(":scope > p strong").map((e) => e.textContent),
      em: q(":scope > p em").map((e) => e.textContent), del: q("del").map((e) => e.textContent),
      code: q(":scope > p code").map((e) => e.textContent), links: q("a").map((e) => [e.textContent, e.getAttribute("href")]),
      ul: q("ul > li").length, ol: q("ul li ol li").map((e) => e.textContent), quote: q("blockquote strong").map((e) => e.textContent),
      th: q("th").map((e) => [e.textContent, e.style.textAlign]), td: q("td").map((e) => e.textContent),
      lang: q(".code .code-head span").map((e) => e.textContent), copy: q(".code button.copy").length,
      kw: q(".hl-k").map((e) => e.textContent), comment: q(".hl-c").map((e) => e.textContent),
      str: q(".hl-s").map((e) => e.textContent), num: q(".hl-n").map((e) => e.textContent), fn: q(".hl-f").map((e) => e.textContent),
      codeText: q("pre code")[0].textContent, imgs: q("img").length, scripts: q("script").length,
      lastP: q("p").at(-1).textContent,
    };
    d.remove();
    return r;
  })()`);
  assert.deepEqual(dom.h2, ["Heading <em>two</em>"]);
  assert.deepEqual(dom.strong, ["bold"]);
  assert.deepEqual(dom.em, ["em"]);
  assert.deepEqual(dom.del, ["gone"]);
  assert.deepEqual(dom.code, ["a<b>"]);
  assert.deepEqual(dom.links, [["a link", "https://example.org/x_(y)"]]);
  assert.equal(dom.ul, 2);
  assert.deepEqual(dom.ol, ["nested"]);
  assert.deepEqual(dom.quote, ["text"]);
  assert.deepEqual(dom.th, [["name", "left"], ["n", "right"]]);
  assert.deepEqual(dom.td, ["x", "1", "y", "22"]);
  assert.deepEqual(dom.lang, ["python"]);
  assert.equal(dom.copy, 1);
  assert.deepEqual(dom.kw, ["def", "return"]);
  assert.deepEqual(dom.comment, ["# square"]);
  assert.deepEqual(dom.str, ["'ok'"]);
  assert.deepEqual(dom.num, ["2"]);
  assert.deepEqual(dom.fn, ["f"]);
  assert.equal(dom.codeText, "def f(x):  # square\n    return x * 2 + 'ok'");
  assert.equal(dom.imgs, 0, "HTML in model output is escaped, not rendered");
  assert.equal(dom.scripts, 0);
  assert.ok(dom.lastP.includes("<img src=x") && dom.lastP.includes("<script>"), dom.lastP);
  assert.equal(await evaluate(`window.__xss === undefined`), true, "no script ran");
  const hl = await evaluate(`[vela.highlight("int main() { return 0x1F; } // c", "cpp"), vela.highlight("let s = \`t\`; /* b */", "ts"), vela.highlight("<b>x</b>", "nolang")]`);
  assert.match(hl[0], /<span class="hl-t">int<\/span> <span class="hl-f">main<\/span>.*<span class="hl-n">0x1F<\/span>.*<span class="hl-c">\/\/ c<\/span>/);
  assert.match(hl[1], /<span class="hl-k">let<\/span> s = <span class="hl-s">`t`<\/span>; <span class="hl-c">\/\* b \*\/<\/span>/);
  assert.equal(hl[2], "&lt;b&gt;x&lt;/b&gt;");
  const reasoning = await evaluate(`(() => {
    const el = vela.messageEl({ role: "assistant", content: "**answer**", reasoning: "step <1>", stats: null }, 0, false);
    const d = el.querySelector("details.reasoning");
    return { open: d.open, text: d.querySelector(".text").textContent, answer: el.querySelector(".answer strong").textContent };
  })()`);
  assert.deepEqual(reasoning, { open: false, text: "step <1>", answer: "answer" }, "reasoning is shown collapsed");
  step("Markdown, highlighting, escaping and the reasoning block render as expected");

  // 3. The model card: the route (key required; 404 without a README.md) and the page's panel.
  fs.rmSync(readme, { force: true });
  let res = await fetch(`${URL_}/model-card`);
  assert.equal(res.status, 401, "/model-card needs the key");
  res = await fetch(`${URL_}/model-card`, { headers: { Authorization: `Bearer ${KEY}` } });
  assert.equal(res.status, 404);
  assert.equal((await res.json()).error.code, "model_card_not_found");
  await click("#card-btn");
  await waitFor("the no-card notice", `!!document.querySelector("#card-body .missing")`);
  await evaluate(`document.getElementById("card").close(); true`);
  const card = "---\nlicense: cc0-1.0\n---\n# tiny-qwen3\n\nA **random** test model.\n\n| metric | value |\n|---|---|\n| ppl | 151936 |\n";
  fs.writeFileSync(readme, card);
  res = await fetch(`${URL_}/model-card`, { headers: { Authorization: `Bearer ${KEY}` } });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /^text\/markdown/);
  assert.equal(await res.text(), card);
  await click("#card-btn");
  const cardDom = await waitFor("the rendered card", `(() => { const b = document.getElementById("card-body"); const h = b.querySelector("h1"); return h && { h1: h.textContent, td: [...b.querySelectorAll("td")].map((e) => e.textContent), meta: b.querySelector("details pre")?.textContent, open: document.getElementById("card").open }; })()`);
  assert.deepEqual(cardDom, { h1: "tiny-qwen3", td: ["ppl", "151936"], meta: "license: cc0-1.0", open: true });
  await evaluate(`document.getElementById("card").close(); true`);
  fs.rmSync(readme, { force: true });
  step("model card: 401 without the key, 404 without README.md, rendered with one");

  // 4. A reply streamed on load, with its token count and tokens/s.
  await goto(`${URL_}/?prompt=Hello%20vela&max_tokens=12`);
  const first = await waitDone("first reply");
  step(`first reply: ${first.text}`);
  assert.equal(first.state, "done", first.text);
  assert.equal(first.tokens, "12");
  assert.equal(first.finish, "length");
  assert.ok(Number(first.tps) > 0, "tokens/s shown");
  const bubbles = await evaluate(`[...document.querySelectorAll("#log .msg")].map((e) => [e.className, e.querySelector(".bubble").textContent.length, e.querySelector(".stats").textContent])`);
  assert.deepEqual(bubbles.map((b) => b[0]), ["msg user", "msg assistant"]);
  assert.ok(bubbles[1][1] > 0, "the assistant bubble has text");
  assert.match(bubbles[1][2], /^12 tokens · [\d.]+ t\/s · prompt \d+ · first token \d+ ms · finish: length$/);
  assert.equal(await evaluate(`location.search`), "", "the prompt is not sent again on reload");

  // 5. A second turn through the form with max_tokens from Settings, as a user would send it.
  await setField("s_max_tokens", "5");
  await setField("s_seed", "7");
  await evaluate(`document.getElementById("input").value = "And again?"; document.getElementById("send").click(); true`);
  await waitFor("the second turn to start", `document.querySelectorAll("#log .msg").length === 4`);
  const second = await waitDone("second reply");
  assert.equal(second.state, "done", second.text);
  assert.equal(second.tokens, "5");
  const secondText = await evaluate(`document.querySelector("#log .msg:last-child .answer").textContent`);

  // 6. Regenerate the last reply (same seed: the same text), then edit the last question.
  // The status is cleared first: five tokens can start and finish between two polls, so waiting
  // for "running" raced the reply; after the clear, only the regenerated reply sets "done".
  await evaluate(`document.getElementById("status").dataset.state = ""; true`);
  await click("#log .msg:last-child .regen");
  const regen = await waitDone("regenerated reply");
  assert.equal(regen.state, "done", regen.text);
  assert.equal(await nMsgs(), 4);
  assert.equal(await evaluate(`document.querySelector("#log .msg:last-child .answer").textContent`), secondText, "seeded regenerate");
  await click("#log .msg:nth-child(3) .edit");
  await evaluate(`document.querySelector("#log .msg:nth-child(3) textarea.edit").value = "Edited question"; document.querySelector("#log .msg:nth-child(3) .save").click(); true`);
  const edited = await waitDone("reply to the edited question");
  assert.equal(edited.state, "done", edited.text);
  assert.equal(await nMsgs(), 4);
  assert.equal(await evaluate(`document.querySelector("#log .msg:nth-child(3) .bubble").textContent`), "Edited question");
  step("second turn, regenerate and edit");

  // 7. Stop a long reply mid-stream.
  await setField("s_max_tokens", "1500");
  await evaluate(`document.getElementById("input").value = "Tell me a long story"; document.getElementById("send").click(); true`);
  await waitFor("tokens to stream", `/generating/.test(document.getElementById("status").textContent)`);
  await click("#stop");
  const stopped = await waitDone("stopped reply");
  assert.equal(stopped.state, "stopped", stopped.text);
  assert.ok(Number(stopped.tokens) > 0 && Number(stopped.tokens) < 1500, `stopped after ${stopped.tokens} tokens`);
  assert.match(await evaluate(`document.querySelector("#log .msg:last-child .stats").textContent`), /stopped$/);
  step(`stopped after ${stopped.tokens} tokens`);

  // 8. The conversation and the settings survive a reload.
  const before = await evaluate(`[...document.querySelectorAll("#log .msg .bubble")].map((e) => e.textContent)`);
  await evaluate(`window.__old = true`);
  await cdp("Page.reload");
  await waitFor("the reloaded page", `!window.__old && document.readyState === "complete" && document.querySelectorAll("#log .msg").length === 6`);
  assert.deepEqual(await evaluate(`[...document.querySelectorAll("#log .msg .bubble")].map((e) => e.textContent)`), before);
  assert.deepEqual(await evaluate(`[...document.querySelectorAll("#conv-list li .title")].map((e) => e.textContent)`), ["Hello vela"]);
  assert.equal(await evaluate(`JSON.parse(localStorage.getItem("vela.settings")).max_tokens`), "1500");
  await waitFor("the model name after reload", `document.getElementById("model").textContent === "tiny-qwen3"`);
  step("conversation and settings persist across a reload");

  // 9. Rename; a new chat through the form; delete it.
  await click("#conv-list li.current .rename");
  await evaluate(`(() => { const i = document.querySelector("#conv-list li input"); i.value = "Renamed chat"; i.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" })); return true; })()`);
  assert.deepEqual(await evaluate(`[...document.querySelectorAll("#conv-list li .title")].map((e) => e.textContent)`), ["Renamed chat"]);
  assert.equal(await evaluate(`JSON.parse(localStorage.getItem("vela.conversations"))[0].title`), "Renamed chat");
  await setField("s_max_tokens", "4");
  await click("#new-chat");
  assert.equal(await nMsgs(), 0);
  await evaluate(`document.getElementById("input").value = "A second conversation"; document.getElementById("send").click(); true`);
  await waitFor("the new chat's reply", `document.querySelectorAll("#log .msg").length === 2 && document.getElementById("status").dataset.state === "done"`);
  assert.deepEqual(await evaluate(`[...document.querySelectorAll("#conv-list li .title")].map((e) => e.textContent)`), ["A second conversation", "Renamed chat"]);
  await click("#conv-list li.current .delete");
  await click("#conv-list li.current .delete");  // the second click confirms
  assert.deepEqual(await evaluate(`[...document.querySelectorAll("#conv-list li .title")].map((e) => e.textContent)`), ["Renamed chat"]);
  assert.equal(await nMsgs(), 6, "the remaining conversation is shown");
  step("rename, new chat, delete");
  const desktop = await cdp("Page.captureScreenshot", { format: "png" });
  fs.writeFileSync(path.join(WORK, "web_ui_desktop.png"), Buffer.from(desktop.data, "base64"));
  const bg = () => evaluate(`getComputedStyle(document.body).backgroundColor`);
  const light = await bg();
  await cdp("Emulation.setEmulatedMedia", { features: [{ name: "prefers-color-scheme", value: "dark" }] });
  const dark = await bg();
  assert.notEqual(dark, light, "prefers-color-scheme: dark switches the palette");
  const darkShot = await cdp("Page.captureScreenshot", { format: "png" });
  fs.writeFileSync(path.join(WORK, "web_ui_dark.png"), Buffer.from(darkShot.data, "base64"));
  await cdp("Emulation.setEmulatedMedia", { features: [] });

  // 10. Phone width: no horizontal overflow, the sidebar is a drawer behind the menu button.
  await cdp("Emulation.setDeviceMetricsOverride", { width: 390, height: 844, deviceScaleFactor: 2, mobile: true });
  await sleep(300);
  const phone = await evaluate(`(() => {
    const r = document.getElementById("sidebar").getBoundingClientRect();
    const t = document.getElementById("toggle-sidebar");
    return { sidebarRight: r.right, toggle: getComputedStyle(t).display, overflow: document.documentElement.scrollWidth - window.innerWidth,
             composer: document.getElementById("input").getBoundingClientRect().width };
  })()`);
  assert.ok(phone.sidebarRight <= 0, `the sidebar is off-screen at phone width (right ${phone.sidebarRight})`);
  assert.notEqual(phone.toggle, "none");
  assert.ok(phone.overflow <= 0, `no horizontal scrolling (${phone.overflow} px too wide)`);
  assert.ok(phone.composer > 200, "the composer uses the width");
  const shot = await cdp("Page.captureScreenshot", { format: "png" });
  fs.writeFileSync(path.join(WORK, "web_ui_phone.png"), Buffer.from(shot.data, "base64"));
  await click("#toggle-sidebar");
  await sleep(400);  // the drawer slides in
  const open = await evaluate(`document.getElementById("sidebar").getBoundingClientRect().left`);
  assert.ok(open >= 0, "the menu button opens the drawer");
  const shotOpen = await cdp("Page.captureScreenshot", { format: "png" });
  fs.writeFileSync(path.join(WORK, "web_ui_phone_sidebar.png"), Buffer.from(shotOpen.data, "base64"));
  step(`phone width OK; screenshots in ${WORK}`);

  assert.deepEqual(pageErrors.map((e) => e.exception?.description || e.text), [], "no uncaught errors in the page");
  ws.close();
  console.log("web_ui: OK");
} finally {
  const exited = new Promise((r) => chromium.once("exit", r));
  chromium.kill("SIGKILL");
  await Promise.race([exited, sleep(5000)]);
  fs.rmSync(readme, { force: true });
  try { fs.rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 }); } catch {}
}
