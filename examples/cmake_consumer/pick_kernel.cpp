// Asks a ckspace library which of its kernels to run for one convolution, and how much
// workspace that kernel needs. Running it (ckspace_run) needs an AMD GPU and the caller's device
// buffers: see docs/dispatcher.md.
#include <cstdint>
#include <cstdio>

#include "ckspace_dispatch.h"

int main() {
  if (ckspace_api_version() != CKSPACE_API_VERSION) {
    std::fprintf(stderr, "ckspace_dispatch.h is from another ckspace than the library\n");
    return 1;
  }
  std::printf("library: %s, %d kernels\n", ckspace_arch(), ckspace_kernel_count());

  // A 3x3 bf16 forward convolution, channels as totals over the groups.
  ckspace_conv_problem p = {};
  p.variant = CKSPACE_FORWARD;
  p.dtype = CKSPACE_DTYPE_BF16;
  p.ndim = 2;
  p.N = 8; p.G = 1; p.C = 256; p.K = 256;
  p.Hi = 56; p.Wi = 56; p.Y = 3; p.X = 3;
  p.stride_h = p.stride_w = 1;
  p.pad_h = p.pad_w = 1;
  p.dil_h = p.dil_w = 1;
  p.k_batch = 1;

  int kernel = -1;
  float tflops = 0;  // an estimate, never a measurement
  const int status = ckspace_select(&p, &kernel, &tflops);
  if (status != CKSPACE_OK) {
    std::printf("no kernel: status %d\n", status);
    return 1;
  }
  const int64_t bytes = ckspace_workspace_size(kernel, &p);
  std::printf("pick: %s\n", ckspace_kernel_name(kernel));
  std::printf("predicted TFLOPS: %.1f, workspace: %lld bytes\n", tflops, static_cast<long long>(bytes));
  return 0;
}
