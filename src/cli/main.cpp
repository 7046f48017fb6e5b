// `vela`: one binary, one subcommand per job. This file owns the command table, --help and the
// top-level error handling (a vela::Error prints "vela: error: ..." and exits 1; no crash).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "core/error.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Command kCommands[] = {
    {"info", vela::cli::cmd_info, "version, build options, CPU features and CUDA devices"},
    {"generate", vela::cli::cmd_generate, "continue a prompt with a model directory (greedy or sampled)"},
    {"chat", vela::cli::cmd_chat, "interactive chat with a model directory (streams replies)"},
    {"serve", vela::cli::cmd_serve, "OpenAI / Anthropic-compatible HTTP server with a web chat page"},
    {"convert", vela::cli::cmd_convert, "rewrite a checkpoint in the HF layout (optionally another dtype)"},
    {"bench", vela::cli::cmd_bench, "benchmarks: `vela bench ops|model|engine|serve` (serve: load-test an OpenAI-compatible server)"},
    {"preprocess", vela::cli::cmd_preprocess, "JSONL -> token shards for training: `vela preprocess --config prep.json IN.jsonl -o DIR`"},
    {"train", vela::cli::cmd_train, "train or fine-tune a model: `vela train --config train.json [--resume]`"},
    {"eval", vela::cli::cmd_eval, "evaluate a model: `vela eval ppl|choice|generate --model DIR --data F.jsonl`"},
    {"tokenize", vela::cli::cmd_tokenize, "tokenizers: `vela tokenize encode|decode|train|chat-template|bench`"},
};

void print_help() {
  std::printf(
      "vela %s — train and serve language models, natively (C++20 + CUDA)\n\n"
      "usage: vela <command> [options]\n\ncommands:\n",
      VELA_VERSION);
  for (const Command& c : kCommands) std::printf("  %-10s %s\n", c.name, c.summary);
  std::printf(
      "\n`vela <command> --help` shows a command's options. Logging: VELA_LOG_LEVEL=debug|info|"
      "warn|error.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    print_help();
    return argc < 2 ? 1 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("vela %s\n", VELA_VERSION);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (std::string(argv[1]) != c.name) continue;
    try {
      return c.run(argc - 2, argv + 2);
    } catch (const vela::Error& e) {
      std::fprintf(stderr, "vela %s: error: %s\n", c.name, e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vela %s: internal error: %s\n", c.name, e.what());
      return 2;
    }
  }
  std::fprintf(stderr, "vela: unknown command '%s' (see `vela --help`)\n", argv[1]);
  return 1;
}
