// The web chat page in headless Chromium, driven over the DevTools protocol (node's WebSocket):
// load /?prompt=...&max_tokens=12 (the page sends it on load), wait in real time until the
// streamed reply is done, check the DOM (assistant bubble, token count, tokens/s), then type a
// second message into the form and send it like a user would.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { URL_, sleep } from "./common.mjs";

const chromium = spawn(process.env.CHROMIUM, [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
  `--user-data-dir=${process.env.VELA_WORK}/chromium-profile`, "--remote-debugging-port=0", "about:blank",
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
  const page = `${URL_}/?prompt=Hello%20vela&max_tokens=12`;
  const target = await (await fetch(`http://${devtools}/json/new?${encodeURIComponent(page)}`,
                                    { method: "PUT" })).json();
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((r, j) => { ws.onopen = r; ws.onerror = j; });
  let id = 0;
  const pending = new Map();
  ws.onmessage = (m) => { const j = JSON.parse(m.data); if (pending.has(j.id)) { pending.get(j.id)(j); pending.delete(j.id); } };
  const evaluate = (expression) => new Promise((resolve) => {
    const i = ++id;
    pending.set(i, (j) => resolve(j.result?.result?.value));
    ws.send(JSON.stringify({ id: i, method: "Runtime.evaluate", params: { expression, returnByValue: true, awaitPromise: true } }));
  });
  const status = () => evaluate(`(() => { const s = document.getElementById("status"); return s ? { text: s.textContent, ...s.dataset } : null; })()`);
  async function waitDone(label) {
    for (let i = 0; i < 600; i++) {
      const s = await status();
      if (s && (s.state === "done" || s.state === "error")) return s;
      await sleep(100);
    }
    throw new Error(`${label}: the reply did not finish`);
  }
  const first = await waitDone("first reply");
  console.log(`web_ui: ${first.text}`);
  assert.equal(first.state, "done", first.text);
  assert.equal(first.tokens, "12");
  assert.equal(first.finish, "length");
  assert.ok(Number(first.tps) > 0, "tokens/s shown");
  const bubbles = await evaluate(`[...document.querySelectorAll(".msg")].map(e => [e.className, e.textContent.length])`);
  assert.deepEqual(bubbles.map((b) => b[0]), ["msg user", "msg assistant"]);
  assert.ok(bubbles[1][1] > 0, "the assistant bubble has text");
  // A second turn through the form, as a user would send it.
  await evaluate(`document.getElementById("max_tokens").value = "5"; document.getElementById("input").value = "And again?"; document.getElementById("send").click(); true`);
  await sleep(50);
  const second = await waitDone("second reply");
  assert.equal(second.state, "done", second.text);
  assert.equal(second.tokens, "5");
  const n = await evaluate(`document.querySelectorAll(".msg").length`);
  assert.equal(n, 4);
  ws.close();
  console.log("web_ui: OK");
} finally {
  chromium.kill("SIGKILL");
}
