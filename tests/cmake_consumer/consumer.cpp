// A C++ program that links a ckspace library through its CMake package (tests/test_package.py).
//
// consumer            prints "package <version> <arch> <manifest sha256>" (what the package's
//                     config said) and "kernels <count>" (what the library says), then exits
// consumer PROBLEMS   then, per line of PROBLEMS (name=value pairs of ckspace_conv_problem's
//                     fields, e.g. "variant=0 dtype=1 ndim=2 N=4 G=1 C=64 ..."), prints what
//                     ckspace_select picks: "<index> <name> <predicted TFLOPS>", or "-1 none 0"
//                     when no kernel of the library can run the problem.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "ckspace_dispatch.h"

namespace {

using Field = int64_t ckspace_conv_problem::*;

// Every field by name: a header whose struct lacks one fails to compile here.
const std::map<std::string, Field> kFields = {
    {"variant", &ckspace_conv_problem::variant},   {"dtype", &ckspace_conv_problem::dtype},
    {"ndim", &ckspace_conv_problem::ndim},         {"N", &ckspace_conv_problem::N},
    {"G", &ckspace_conv_problem::G},               {"C", &ckspace_conv_problem::C},
    {"K", &ckspace_conv_problem::K},               {"Di", &ckspace_conv_problem::Di},
    {"Hi", &ckspace_conv_problem::Hi},             {"Wi", &ckspace_conv_problem::Wi},
    {"Z", &ckspace_conv_problem::Z},               {"Y", &ckspace_conv_problem::Y},
    {"X", &ckspace_conv_problem::X},               {"stride_d", &ckspace_conv_problem::stride_d},
    {"stride_h", &ckspace_conv_problem::stride_h}, {"stride_w", &ckspace_conv_problem::stride_w},
    {"pad_d", &ckspace_conv_problem::pad_d},       {"pad_h", &ckspace_conv_problem::pad_h},
    {"pad_w", &ckspace_conv_problem::pad_w},       {"dil_d", &ckspace_conv_problem::dil_d},
    {"dil_h", &ckspace_conv_problem::dil_h},       {"dil_w", &ckspace_conv_problem::dil_w},
    {"k_batch", &ckspace_conv_problem::k_batch},
};

// The problem of one line; false (and a message) for a word that names no field.
bool parse(const std::string& line, ckspace_conv_problem* problem) {
  *problem = ckspace_conv_problem{};
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    const auto equals = word.find('=');
    const auto field = equals == std::string::npos ? kFields.end() : kFields.find(word.substr(0, equals));
    if (field == kFields.end()) {
      std::fprintf(stderr, "not a field=value pair of ckspace_conv_problem: %s\n", word.c_str());
      return false;
    }
    problem->*(field->second) = std::stoll(word.substr(equals + 1));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (ckspace_api_version() != CKSPACE_API_VERSION) {
    std::fprintf(stderr, "the library's API version %d is not the header's %d\n", ckspace_api_version(),
                 CKSPACE_API_VERSION);
    return 3;
  }
  std::printf("package %s\nkernels %d\n", CKSPACE_PACKAGE_DESCRIPTION, ckspace_kernel_count());
  if (argc < 2) return 0;
  std::ifstream problems(argv[1]);
  if (!problems) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  std::string line;
  while (std::getline(problems, line)) {
    ckspace_conv_problem problem;
    if (!parse(line, &problem)) return 2;
    int kernel = -1;
    float tflops = 0.0f;
    const int status = ckspace_select(&problem, &kernel, &tflops);
    if (status == CKSPACE_OK) {
      std::printf("%d %s %.9g\n", kernel, ckspace_kernel_name(kernel), tflops);
    } else if (status == CKSPACE_NO_KERNEL) {
      std::printf("-1 none 0\n");
    } else {
      std::fprintf(stderr, "ckspace_select: status %d for: %s\n", status, line.c_str());
      return 1;
    }
  }
  return 0;
}
