// The chat page served at `/`: one self-contained HTML file (no external assets) embedded in the
// binary. It streams replies from /v1/chat/completions over SSE and shows tokens/s. For headless
// tests, `/?prompt=TEXT&max_tokens=N` sends TEXT on load and, when the reply ends, fills
// #status with "done tokens=N tps=X" (and data attributes) for the test to read from the DOM.
#pragma once

namespace vela {

const char* web_ui_html();

}  // namespace vela
