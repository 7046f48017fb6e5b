// `vela info`: version, build options, CPU model and features, threads, BLAS, CUDA devices.
#include <cblas.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/cuda/cuda_api.h"
#include "core/json.h"
#include "core/parallel.h"

extern "C" char* openblas_get_config(void);

namespace vela::cli {
namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t c = line.find(':');
      if (c != std::string::npos) return line.substr(c + 2);
    }
  }
  return "unknown";
}

json cpu_features() {
  json j = json::object();
  __builtin_cpu_init();
  j["avx2"] = static_cast<bool>(__builtin_cpu_supports("avx2"));
  j["fma"] = static_cast<bool>(__builtin_cpu_supports("fma"));
  j["f16c"] = static_cast<bool>(__builtin_cpu_supports("f16c"));
  j["avx512f"] = static_cast<bool>(__builtin_cpu_supports("avx512f"));
  j["avx512bw"] = static_cast<bool>(__builtin_cpu_supports("avx512bw"));
  j["avx512bf16"] = static_cast<bool>(__builtin_cpu_supports("avx512bf16"));
  return j;
}

json compiled_features() {
  json j = json::array();
#ifdef __AVX2__
  j.push_back("avx2");
#endif
#ifdef __FMA__
  j.push_back("fma");
#endif
#ifdef __F16C__
  j.push_back("f16c");
#endif
#ifdef __AVX512F__
  j.push_back("avx512f");
#endif
#ifdef __AVX512BF16__
  j.push_back("avx512bf16");
#endif
  return j;
}

}  // namespace

json info_json() {
  json j;
  j["version"] = VELA_VERSION;
  json build;
#ifdef VELA_HAS_CUDA
  build["cuda"] = true;
  build["cuda_archs"] = VELA_CUDA_ARCHS_STR;
#else
  build["cuda"] = false;
#endif
#ifdef VELA_NATIVE_BUILD
  build["native"] = true;
#else
  build["native"] = false;
#endif
  build["compiled_cpu_features"] = compiled_features();
#ifdef NDEBUG
  build["type"] = "release";
#else
  build["type"] = "debug";
#endif
  j["build"] = build;
  j["cpu"] = {{"model", cpu_model()}, {"threads", num_threads()}, {"features", cpu_features()},
              {"blas", openblas_get_config()}};
  json gpus = json::array();
  if (cuda::available()) {
    for (int i = 0; i < cuda::device_count(); ++i) gpus.push_back(cuda::device_description(i));
  }
  j["cuda_devices"] = gpus;
  return j;
}

int cmd_info(int argc, char** argv) {
  Args args(argc, argv, {"json", "help"});
  if (args.has("help")) {
    std::printf("usage: vela info [--json]\n  Prints version, build options, CPU and CUDA devices.\n");
    return 0;
  }
  bool as_json = args.has("json");
  args.check_all_used();
  json j = info_json();
  if (as_json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("vela %s\n", j["version"].get<std::string>().c_str());
  std::printf("build     cuda=%s%s native=%s type=%s compiled for: %s\n",
              j["build"]["cuda"].get<bool>() ? "on" : "off",
              j["build"].contains("cuda_archs")
                  ? (" (sm_" + j["build"]["cuda_archs"].get<std::string>() + ")").c_str()
                  : "",
              j["build"]["native"].get<bool>() ? "on" : "off",
              j["build"]["type"].get<std::string>().c_str(),
              j["build"]["compiled_cpu_features"].dump().c_str());
  std::printf("cpu       %s, %d threads\n", j["cpu"]["model"].get<std::string>().c_str(),
              j["cpu"]["threads"].get<int>());
  std::printf("features  %s\n", j["cpu"]["features"].dump().c_str());
  std::printf("blas      OpenBLAS %s\n", j["cpu"]["blas"].get<std::string>().c_str());
  if (j["cuda_devices"].empty()) {
    std::printf("cuda      %s\n", j["build"]["cuda"].get<bool>() ? "no usable device"
                                                                  : "not built (CPU-only build)");
  } else {
    int i = 0;
    for (const auto& d : j["cuda_devices"])
      std::printf("cuda:%d    %s\n", i++, d.get<std::string>().c_str());
  }
  return 0;
}

}  // namespace vela::cli
