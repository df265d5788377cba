/* A stand-in for ckspace_run (tests/test_package.py): linked with the tree's host units and
   libamdhip64, it makes a library that needs HIP's runtime as the kernel library does, so that a
   consumer linking and loading such a library is tested without compiling a kernel. */
#include "ckspace_dispatch.h"

int hipRuntimeGetVersion(int* version); /* HIP's; its hipError_t is an int-sized enum */

int ckspace_run(int kernel, const ckspace_conv_problem* problem, const void* a, const void* b, void* c,
                void* workspace, size_t workspace_bytes, void* stream) {
  int version = 0;
  (void)kernel, (void)problem, (void)a, (void)b, (void)c, (void)workspace, (void)workspace_bytes, (void)stream;
  (void)hipRuntimeGetVersion(&version);
  return CKSPACE_LAUNCH_FAILED; /* no kernel here to launch */
}
