// SPDX-License-Identifier: MIT
// A stand-in HIP runtime for `ckspace hipdnn census`: one device, of the arch in
// $CKSPACE_CENSUS_DEVICE_ARCH, and nothing else. The census loads it (under the soname the plugin
// needs, libamdhip64.so.N) before the plugin, so that a plugin linked with HIP answers
// "is this graph applicable" on a machine with no GPU, or with a GPU of another arch, exactly as
// it would on a device of its own arch. Only the calls that question answers go through are real:
// the current device and its properties, the registration of the kernels' code objects (kept, never
// loaded) and error strings. Every other HIP function the plugin imports is generated beside this
// file as a stub that returns hipErrorNotSupported: a plugin that tried to allocate, copy or launch
// would be refused, never served by a pretence.
#include <hip/hip_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define STANDIN_ARCH_VARIABLE "CKSPACE_CENSUS_DEVICE_ARCH"

static const char* standin_arch(void) {
  const char* arch = getenv(STANDIN_ARCH_VARIABLE);
  return (arch != NULL && arch[0] != '\0') ? arch : NULL;
}

hipError_t hipGetDevice(int* device) {
  if (device == NULL) return hipErrorInvalidValue;
  if (standin_arch() == NULL) return hipErrorNoDevice;
  *device = 0;
  return hipSuccess;
}

hipError_t hipGetDeviceCount(int* count) {
  if (count == NULL) return hipErrorInvalidValue;
  *count = standin_arch() != NULL ? 1 : 0;
  return standin_arch() != NULL ? hipSuccess : hipErrorNoDevice;
}

hipError_t hipSetDevice(int device) {
  return (device == 0 && standin_arch() != NULL) ? hipSuccess : hipErrorInvalidDevice;
}

/* hipGetDeviceProperties is hipGetDevicePropertiesR0600 in ROCm 6's headers: either way the name
   and the struct are the ones the plugin was compiled against on this machine's ROCm. */
hipError_t hipGetDeviceProperties(hipDeviceProp_t* props, int device) {
  const char* arch = standin_arch();
  if (props == NULL) return hipErrorInvalidValue;
  if (arch == NULL || device != 0) return hipErrorInvalidDevice;
  memset(props, 0, sizeof *props);
  strncpy(props->name, "ckspace census stand-in", sizeof props->name - 1);
  strncpy(props->gcnArchName, arch, sizeof props->gcnArchName - 1);
  return hipSuccess;
}

const char* hipGetErrorString(hipError_t error) {
  switch (error) {
    case hipSuccess: return "hipSuccess";
    case hipErrorNoDevice: return "hipErrorNoDevice (ckspace census stand-in: no device arch given)";
    case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    default: return "hipErrorNotSupported (ckspace census stand-in: no device work)";
  }
}

const char* hipGetErrorName(hipError_t error) { return hipGetErrorString(error); }

/* The kernels' code objects register from the plugin's constructors: kept by handle, never loaded. */
static void* standin_fat_binary;
void** __hipRegisterFatBinary(const void* data) {
  (void)data;
  return &standin_fat_binary;
}
void __hipUnregisterFatBinary(void** handle) { (void)handle; }
void __hipRegisterFunction(void** modules, const void* host_function, char* device_function,
                           const char* device_name, unsigned int thread_limit, void* tid, void* bid,
                           void* block_dim, void* grid_dim, int* wsize) {
  (void)modules; (void)host_function; (void)device_function; (void)device_name; (void)thread_limit;
  (void)tid; (void)bid; (void)block_dim; (void)grid_dim; (void)wsize;
}
void __hipRegisterVar(void** modules, void* var, char* host_var, char* device_var, int ext, size_t size,
                      int constant, int global) {
  (void)modules; (void)var; (void)host_var; (void)device_var; (void)ext; (void)size; (void)constant;
  (void)global;
}
