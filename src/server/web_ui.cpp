// The embedded chat page (bytes generated from src/server/web/chat.html at build time) and the
// model card reader behind GET /model-card.
#include "server/web_ui.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "server/web/chat_html.h"

namespace vela {

std::string_view web_ui_html() {
  return {reinterpret_cast<const char*>(embedded::chat_html), embedded::chat_html_size};
}

std::optional<std::string> read_model_card(const std::string& model_dir) {
  if (model_dir.empty()) return std::nullopt;
  std::filesystem::path path = std::filesystem::path(model_dir) / "README.md";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  VELA_CHECK_T(IoError, in.good(), "cannot read the model card ", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace vela
