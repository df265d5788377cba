/* A hipDNN engine plugin for tests/test_census.py: the functions the census calls, written from
 * hipDNN's plugin contract, answering by what a graph's bytes hold. A graph holding the int64
 * FAKE_CRASH dereferences NULL, one holding FAKE_HANG never returns, one holding FAKE_DECLINE is
 * declined with a reason naming it, any other is served by the one engine. Built with
 * -DFAKE_HIP, the device check asks HIP (hipGetDevice, hipGetDeviceProperties): the plugin then
 * links the HIP runtime, as a plugin ckspace build links does, and declines every graph unless the
 * current device's gcnArchName begins with FAKE_ARCH. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#ifdef FAKE_HIP
#include <hip/hip_runtime_api.h>
#endif

#define EXPORT __attribute__((visibility("default")))
#define FAKE_CRASH 777
#define FAKE_HANG 555
#define FAKE_DECLINE 333
#ifndef FAKE_ARCH
#define FAKE_ARCH "gfx942"
#endif

typedef struct { const void* ptr; size_t size; } const_data;
static const int64_t ENGINE = 4242;
static const char* last_error = "";
static char reason[256];

static int holds(const const_data* g, int64_t value) {
  if (g == NULL || g->ptr == NULL) return 0;
  for (size_t i = 0; i + 8 <= g->size; ++i) {
    int64_t v;
    memcpy(&v, (const char*)g->ptr + i, 8);
    if (v == value) return 1;
  }
  return 0;
}

static const char* device_refusal(void) {
#ifdef FAKE_HIP
  int device = -1;
  if (hipGetDevice(&device) != hipSuccess) return "HIP reports no current device";
  hipDeviceProp_t props;
  if (hipGetDeviceProperties(&props, device) != hipSuccess) return "HIP reports no device properties";
  if (strncmp(props.gcnArchName, FAKE_ARCH, strlen(FAKE_ARCH)) != 0) {
    strcpy(reason, "the device is ");
    strncat(reason, props.gcnArchName, 64);
    return reason;
  }
#endif
  return NULL;
}

EXPORT void hipdnnPluginGetLastErrorString(const char** text) { if (text) *text = last_error; }
EXPORT int hipdnnEnginePluginGetAllEngineIds(int64_t* ids, uint32_t max, uint32_t* n) {
  *n = 1;
  if (max > 0) ids[0] = ENGINE;
  return 0;
}
EXPORT int hipdnnEnginePluginGetEngineName(int64_t id, const char** name) {
  if (id != ENGINE) return 5;
  *name = "CKSPACE_" FAKE_ARCH_UPPER "_CONV_FWD";
  return 0;
}
EXPORT int hipdnnEnginePluginCreate(void** handle) { static int h; *handle = &h; return 0; }
EXPORT int hipdnnEnginePluginDestroy(void* handle) { (void)handle; return 0; }
EXPORT int hipdnnEnginePluginGetApplicableEngineIds(void* handle, const const_data* graph, int64_t* ids, uint32_t max,
                                                   uint32_t* n) {
  (void)handle;
  *n = 0;
  const char* refusal = device_refusal();
  if (refusal != NULL) { last_error = refusal; return 0; }
  if (graph == NULL || graph->ptr == NULL || graph->size == 0) { last_error = "no graph"; return 0; }
  if (holds(graph, FAKE_CRASH)) { volatile int* null = NULL; return *null; }
  if (holds(graph, FAKE_HANG)) for (;;) sleep(1);
  if (holds(graph, FAKE_DECLINE)) { last_error = "not applicable: 333 channels are not served"; return 0; }
  *n = 1;
  if (max > 0) ids[0] = ENGINE;
  return 0;
}
