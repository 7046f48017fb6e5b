// The embedded chat page. Kept small on purpose: plain DOM, fetch + ReadableStream for SSE,
// the API key (if any) from a field kept in localStorage.
#include "server/web_ui.h"

namespace vela {

const char* web_ui_html() {
  return R"VELAHTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vela chat</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 0; display: flex; flex-direction: column; height: 100vh; background: #f6f6f4; }
  header { padding: 8px 16px; background: #22313f; color: #fff; display: flex; gap: 12px; align-items: center; }
  header input { width: 14em; }
  #log { flex: 1; overflow-y: auto; padding: 16px; }
  .msg { max-width: 48em; margin: 8px 0; padding: 8px 12px; border-radius: 8px; white-space: pre-wrap; }
  .user { background: #dde9f5; margin-left: auto; }
  .assistant { background: #fff; border: 1px solid #ddd; }
  .reasoning { color: #777; font-style: italic; }
  form { display: flex; gap: 8px; padding: 12px 16px; background: #fff; border-top: 1px solid #ddd; }
  textarea { flex: 1; height: 3em; }
  #status { font-size: 12px; color: #ccc; margin-left: auto; }
</style>
</head>
<body>
<header><strong>vela</strong><span id="model"></span>
  <label>max tokens <input id="max_tokens" type="number" value="256" min="1" style="width:5em"></label>
  <label>temperature <input id="temperature" type="number" value="0.7" step="0.1" min="0" style="width:4em"></label>
  <label>API key <input id="api_key" type="password" placeholder="(none)"></label>
  <span id="status">ready</span></header>
<div id="log"></div>
<form id="form"><textarea id="input" placeholder="Type a message (Enter sends, Shift+Enter breaks the line)"></textarea>
  <button id="send" type="submit">Send</button><button id="reset" type="button">Reset</button></form>
<script>
const $ = (id) => document.getElementById(id);
const messages = [];
const keyField = $("api_key");
keyField.value = localStorage.getItem("vela_api_key") || "";
keyField.onchange = () => localStorage.setItem("vela_api_key", keyField.value);
function headers() {
  const h = { "Content-Type": "application/json" };
  if (keyField.value) h["Authorization"] = "Bearer " + keyField.value;
  return h;
}
function bubble(role, text) {
  const d = document.createElement("div");
  d.className = "msg " + role;
  d.textContent = text;
  $("log").appendChild(d);
  $("log").scrollTop = $("log").scrollHeight;
  return d;
}
fetch("/v1/models", { headers: headers() }).then(r => r.json()).then(j => {
  if (j.data && j.data[0]) $("model").textContent = j.data[0].id;
}).catch(() => {});
async function send(text, maxTokens) {
  const status = $("status");
  messages.push({ role: "user", content: text });
  bubble("user", text);
  const out = bubble("assistant", "");
  const reasoning = document.createElement("div");
  reasoning.className = "reasoning";
  const answer = document.createElement("span");
  out.appendChild(reasoning); out.appendChild(answer);
  $("send").disabled = true;
  status.textContent = "waiting...";
  status.dataset.state = "running";
  const body = { messages, stream: true, stream_options: { include_usage: true },
                 max_tokens: maxTokens || Number($("max_tokens").value) || 256,
                 temperature: Number($("temperature").value) };
  const t0 = performance.now();
  let tFirst = 0, nTokens = 0, content = "", finish = "", error = "";
  try {
    const res = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (!res.ok) {
      const j = await res.json().catch(() => ({}));
      throw new Error((j.error && j.error.message) || ("HTTP " + res.status));
    }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const line = buf.slice(0, cut); buf = buf.slice(cut + 2);
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) { error = j.error.message; continue; }
        if (j.usage) nTokens = j.usage.completion_tokens;
        for (const c of j.choices || []) {
          const d = c.delta || {};
          if (d.reasoning_content) reasoning.textContent += d.reasoning_content;
          if (d.content) { content += d.content; answer.textContent = content; }
          if (c.finish_reason) finish = c.finish_reason;
          if (!tFirst && (d.content || d.reasoning_content)) tFirst = performance.now();
        }
        const secs = (performance.now() - t0) / 1000;
        status.textContent = "streaming... " + (secs > 0 ? (content.length / secs).toFixed(0) : 0) + " chars/s";
      }
    }
  } catch (e) { error = String(e.message || e); }
  const secs = (performance.now() - (tFirst || t0)) / 1000;
  const tps = nTokens && secs > 0 ? nTokens / secs : 0;
  messages.push({ role: "assistant", content });
  $("send").disabled = false;
  if (error) { out.classList.add("error"); answer.textContent += "\n[error] " + error; }
  status.textContent = error ? "error: " + error
      : "done tokens=" + nTokens + " tps=" + tps.toFixed(1) + " finish=" + finish;
  status.dataset.tokens = nTokens; status.dataset.tps = tps.toFixed(3);
  status.dataset.chars = content.length; status.dataset.finish = finish;
  status.dataset.state = error ? "error" : "done";
}
$("form").onsubmit = (e) => { e.preventDefault(); const t = $("input").value.trim(); if (t) { $("input").value = ""; send(t); } };
$("input").onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); } };
$("reset").onclick = () => { messages.length = 0; $("log").innerHTML = ""; $("status").textContent = "ready"; };
const q = new URLSearchParams(location.search);
if (q.get("prompt")) send(q.get("prompt"), Number(q.get("max_tokens")) || 0);
</script>
</body>
</html>
)VELAHTML";
}

}  // namespace vela
