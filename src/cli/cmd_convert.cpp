// `vela convert`: load a checkpoint (HF layout, any supported dtype) and write it back in the HF
// layout (config.json + model.safetensors) in the requested dtype — what vela's trainer writes
// and what transformers loads.
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace vela::cli {

int cmd_convert(int argc, char** argv) {
  Args args(argc, argv, {"help"});
  if (args.has("help")) {
    std::printf("usage: vela convert --model DIR --out DIR [--dtype f32|bf16|f16]\n");
    return 0;
  }
  std::string in = args.require("model"), out = args.require("out");
  DType dtype = parse_dtype(args.get("dtype", "f32"));
  args.check_all_used();
  Transformer m = Transformer::load(in, dtype);
  save_model(m, out);
  std::printf("wrote %s (%lld params, %s)\n", out.c_str(),
              static_cast<long long>(m.config.n_params()), dtype_name(dtype));
  return 0;
}

}  // namespace vela::cli
