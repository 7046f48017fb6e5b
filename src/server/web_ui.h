// The chat page served at `/` and the model card behind it. The page is one self-contained HTML
// file (src/server/web/chat.html: Markdown rendering, code highlighting, conversations in
// localStorage, settings, streaming over /v1/chat/completions) embedded in the binary at build
// time; no external assets. GET /model-card returns the served model directory's README.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace vela {

// The page's bytes (UTF-8 HTML).
std::string_view web_ui_html();

// The model card: `model_dir`/README.md as text, or nullopt when the directory has none (or no
// directory is known). Throws IoError when the file exists but cannot be read.
std::optional<std::string> read_model_card(const std::string& model_dir);

}  // namespace vela
