// Weight loading errors: a missing, unexpected or mis-shaped tensor is an error naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/safetensors.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace vela {
namespace {

namespace fs = std::filesystem;

// Copies the llama_gqa fixture into a temp dir with its tensors edited by `edit`.
std::string edited_copy(const std::string& tag,
                        void (*edit)(std::vector<std::pair<std::string, Tensor>>&)) {
  const std::string src = "fixtures/models/llama_gqa";
  fs::path dir = fs::temp_directory_path() / ("vela_weights_" + tag + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(src + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  SafetensorsReader r = SafetensorsReader::open(src + "/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> t;
  for (const auto& n : r.names()) t.emplace_back(n, r.get(n));
  edit(t);
  save_safetensors((dir / "model.safetensors").string(), t);
  return dir.string();
}

std::string load_error(const std::string& dir) {
  try {
    Transformer::load(dir);
  } catch (const Error& e) {
    fs::remove_all(dir);
    return e.what();
  }
  fs::remove_all(dir);
  return "";
}

TEST(Weights, MissingTensorIsNamed) {
  std::string dir = edited_copy("missing", [](auto& t) {
    std::erase_if(t, [](const auto& p) { return p.first == "model.layers.1.mlp.up_proj.weight"; });
  });
  EXPECT_NE(load_error(dir).find("missing tensor 'model.layers.1.mlp.up_proj.weight'"), std::string::npos);
}

TEST(Weights, UnexpectedTensorIsNamed) {
  std::string dir = edited_copy("extra", [](auto& t) {
    t.emplace_back("model.layers.0.mlp.extra.weight", Tensor::zeros({4}, DType::kF32));
  });
  EXPECT_NE(load_error(dir).find("'model.layers.0.mlp.extra.weight' is not used"), std::string::npos);
}

TEST(Weights, MisShapedTensorIsNamed) {
  std::string dir = edited_copy("shape", [](auto& t) {
    for (auto& p : t)
      if (p.first == "model.norm.weight") p.second = Tensor::zeros({63}, DType::kF32);
  });
  std::string e = load_error(dir);
  EXPECT_NE(e.find("'model.norm.weight' has shape [63], expected [64]"), std::string::npos) << e;
}

TEST(Weights, MissingDirectoryIsAClearError) {
  EXPECT_THROW(Transformer::load("/nonexistent/model"), IoError);
}

}  // namespace
}  // namespace vela
