// `vela convert`: load a checkpoint (HF layout, any supported dtype) and write it back in the HF
// layout (config.json + model.safetensors) in the requested dtype — what vela's trainer writes
// and what transformers loads. --merge-lora DIR folds PEFT LoRA adapters into the weights first
// (W += alpha / r * B A per adapted projection), so the output is a plain model.
#include <cstdio>
#include <filesystem>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/lora_adapter.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace vela::cli {

int cmd_convert(int argc, char** argv) {
  Args args(argc, argv, {"help"});
  if (args.has("help")) {
    std::printf(
        "usage: vela convert --model DIR --out DIR [--dtype f32|bf16|f16] [--merge-lora DIR "
        "...]\n");
    return 0;
  }
  std::string in = args.require("model"), out = args.require("out");
  DType dtype = parse_dtype(args.get("dtype", "f32"));
  const std::vector<std::string> merge = args.get_all("merge-lora");
  args.check_all_used();
  // Merged in f32 (one rounding into the output dtype at the end).
  Transformer m = Transformer::load(in, merge.empty() ? dtype : DType::kF32);
  for (const std::string& dir : merge) {
    merge_lora_adapter(m, dir);
    std::printf("merged LoRA adapter %s\n", dir.c_str());
  }
  if (!merge.empty() && dtype != DType::kF32) {
    save_model(m, out);  // f32, reloaded below in the requested dtype
    m = Transformer::load(out, dtype);
  }
  save_model(m, out);
  // The tokenizer and generation files travel with the weights (a merged model is self-contained).
  namespace fs = std::filesystem;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                        "generation_config.json", "chat_template.jinja"}) {
    const fs::path src = fs::path(in) / f, dst = fs::path(out) / f;
    if (fs::is_regular_file(src) && fs::absolute(src) != fs::absolute(dst))
      fs::copy_file(src, dst, fs::copy_options::overwrite_existing);
  }
  std::printf("wrote %s (%lld params, %s)\n", out.c_str(),
              static_cast<long long>(m.config.n_params()), dtype_name(dtype));
  return 0;
}

}  // namespace vela::cli
