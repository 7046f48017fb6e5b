// The `vela` subcommands. Each takes the arguments after its name and returns the exit code;
// errors escape as vela::Error and main() prints them.
#pragma once

namespace vela::cli {

int cmd_info(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_preprocess(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_eval(int argc, char** argv);

}  // namespace vela::cli
