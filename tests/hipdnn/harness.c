/* Plays hipDNN's part for tests/test_hipdnn.py: loads an engine plugin as hipDNN's loader does and
 * calls it in hipDNN's order. Written from hipDNN's documented plugin contract, independently of
 * the plugin: it declares the ABI itself (never including the plugin's headers) and computes the
 * engine ids' FNV-1a hash itself.
 *
 *   harness PLUGIN check
 *       dlopen(RTLD_NOW | RTLD_LOCAL), resolve every required symbol, check the plugin type, the API
 *       major version and that each engine id is the hash of its name; prints
 *       "plugin NAME VERSION API" and one "engine ID NAME" line per engine.
 *   harness PLUGIN applicable GRAPH...
 *       per serialized Graph file: "GRAPH: ID..." (the applicable engines) or
 *       "GRAPH: none: LAST ERROR".
 *   harness PLUGIN run GRAPH CONFIG DETAILS OUT_UID OUT_FILE OUT_BYTES UID=FILE...
 *       create, all ids, set stream, applicable ids, engine details (written to DETAILS), workspace
 *       size, execution context, its workspace size (must agree), execute with host buffers (the
 *       stand-in ckspace_run computes on host memory; the inputs read from files, the output buffer
 *       zeroed and written to OUT_FILE), destroy; prints "workspace BYTES" and "kernel-pinned ..."
 *       lines, or "refused STATUS: LAST ERROR" where a call fails.
 *   harness PLUGIN time ROUNDS GRAPH...
 *       per graph, the mean wall time of one applicability question over ROUNDS, the log level set
 *       to warnings: "GRAPH: NS ns".
 *   harness PLUGIN threads ROUNDS GRAPH...
 *       two handles on two threads, each asking applicability of every graph ROUNDS times; prints
 *       "threads agree" when both threads' answers equal the single-threaded ones.
 * Log lines the plugin sends through the logging callback are printed as "log SEVERITY: MESSAGE". */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int status_t;
typedef struct { const void* ptr; size_t size; } const_data;
typedef struct { int64_t uid; void* ptr; } device_buffer;
typedef void (*callback_t)(int severity, const char* message);

static struct {
  status_t (*get_name)(const char**);
  status_t (*get_version)(const char**);
  status_t (*get_api_version)(const char**);
  status_t (*get_type)(int*);
  void (*get_last_error)(const char**);
  status_t (*set_logging_callback)(callback_t);
  status_t (*set_log_level)(int);
  status_t (*get_all_engine_ids)(int64_t*, uint32_t, uint32_t*);
  status_t (*get_engine_name)(int64_t, const char**);
  status_t (*create)(void**);
  status_t (*destroy)(void*);
  status_t (*set_stream)(void*, void*);
  status_t (*get_applicable_engine_ids)(void*, const const_data*, int64_t*, uint32_t, uint32_t*);
  status_t (*get_engine_details)(void*, int64_t, const const_data*, const_data*);
  status_t (*destroy_engine_details)(void*, const_data*);
  status_t (*get_workspace_size)(void*, const const_data*, const const_data*, size_t*);
  status_t (*create_execution_context)(void*, const const_data*, const const_data*, void**);
  status_t (*destroy_execution_context)(void*, void*);
  status_t (*get_workspace_size_from_execution_context)(void*, void*, size_t*);
  status_t (*execute_op_graph)(void*, void*, void*, const device_buffer*, uint32_t);
} api;

static void die(const char* what, const char* detail) {
  printf("FAIL %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(1);
}

static void* symbol(void* library, const char* name, int required) {
  void* found = dlsym(library, name);
  if (found == NULL && required) die("missing required symbol", name);
  return found;
}

static void load(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) die("dlopen", dlerror());
  *(void**)&api.get_name = symbol(lib, "hipdnnPluginGetName", 1);
  *(void**)&api.get_version = symbol(lib, "hipdnnPluginGetVersion", 1);
  *(void**)&api.get_api_version = symbol(lib, "hipdnnPluginGetApiVersion", 0);
  *(void**)&api.get_type = symbol(lib, "hipdnnPluginGetType", 1);
  *(void**)&api.get_last_error = symbol(lib, "hipdnnPluginGetLastErrorString", 1);
  *(void**)&api.set_logging_callback = symbol(lib, "hipdnnPluginSetLoggingCallback", 0);
  *(void**)&api.set_log_level = symbol(lib, "hipdnnPluginSetLogLevel", 0);
  *(void**)&api.get_all_engine_ids = symbol(lib, "hipdnnEnginePluginGetAllEngineIds", 1);
  *(void**)&api.get_engine_name = symbol(lib, "hipdnnEnginePluginGetEngineName", 0);
  *(void**)&api.create = symbol(lib, "hipdnnEnginePluginCreate", 1);
  *(void**)&api.destroy = symbol(lib, "hipdnnEnginePluginDestroy", 1);
  *(void**)&api.set_stream = symbol(lib, "hipdnnEnginePluginSetStream", 1);
  *(void**)&api.get_applicable_engine_ids = symbol(lib, "hipdnnEnginePluginGetApplicableEngineIds", 1);
  *(void**)&api.get_engine_details = symbol(lib, "hipdnnEnginePluginGetEngineDetails", 1);
  *(void**)&api.destroy_engine_details = symbol(lib, "hipdnnEnginePluginDestroyEngineDetails", 1);
  *(void**)&api.get_workspace_size = symbol(lib, "hipdnnEnginePluginGetWorkspaceSize", 1);
  *(void**)&api.create_execution_context = symbol(lib, "hipdnnEnginePluginCreateExecutionContext", 1);
  *(void**)&api.destroy_execution_context = symbol(lib, "hipdnnEnginePluginDestroyExecutionContext", 1);
  *(void**)&api.get_workspace_size_from_execution_context =
      symbol(lib, "hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext", 1);
  *(void**)&api.execute_op_graph = symbol(lib, "hipdnnEnginePluginExecuteOpGraph", 1);
  int type = -1;
  if (api.get_type(&type) != 0 || type != 1) die("plugin type is not ENGINE", NULL);
}

static void on_log(int severity, const char* message) { printf("log %d: %s\n", severity, message); }

static int64_t fnv1a(const char* text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const unsigned char* p = (const unsigned char*)text; *p; ++p) hash = (hash ^ *p) * 0x100000001b3ULL;
  return (int64_t)hash;
}

static const char* last_error(void) {
  const char* text = NULL;
  api.get_last_error(&text);
  return text ? text : "(null)";
}

static const_data read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) die("cannot open", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* data = malloc(size > 0 ? (size_t)size : 1);
  if (size > 0 && fread(data, 1, (size_t)size, f) != (size_t)size) die("cannot read", path);
  fclose(f);
  const_data d = {data, (size_t)size};
  return d;
}

static void write_file(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, size, f) != size) die("cannot write", path);
  fclose(f);
}

static int check(void) {
  const char *name, *version, *api_version = "1.0.0";  /* hipDNN's default for a plugin without the symbol */
  if (api.get_name(&name) != 0 || api.get_version(&version) != 0) die("name or version", NULL);
  if (api.get_api_version != NULL && api.get_api_version(&api_version) != 0) die("api version", NULL);
  if (atoi(api_version) != 1) die("API major version is not 1 (hipDNN drops the plugin)", api_version);
  printf("plugin %s %s %s\n", name, version, api_version);
  uint32_t count = 0;
  if (api.get_all_engine_ids(NULL, 0, &count) != 0 || count == 0) die("engine count", NULL);
  int64_t* ids = calloc(count, sizeof *ids);
  uint32_t stored = 0;
  if (api.get_all_engine_ids(ids, count, &stored) != 0 || stored != count) die("engine ids", NULL);
  for (uint32_t i = 0; i < count; ++i) {
    const char* engine = NULL;
    if (api.get_engine_name == NULL || api.get_engine_name(ids[i], &engine) != 0) die("engine name", NULL);
    if (fnv1a(engine) != ids[i]) die("engine id is not the FNV-1a hash of its name", engine);
    printf("engine %" PRId64 " %s\n", ids[i], engine);
  }
  free(ids);
  return 0;
}

/* The applicable engines of a graph, or the reason there are none, as one line. */
static void applicable(void* handle, const const_data* graph, char* out, size_t size) {
  int64_t ids[8];
  uint32_t count = 0;
  status_t status = api.get_applicable_engine_ids(handle, graph, ids, 8, &count);
  if (status != 0) {
    snprintf(out, size, "status %d: %s", status, last_error());
    return;
  }
  if (count == 0) {
    snprintf(out, size, "none: %s", last_error());
    return;
  }
  size_t used = 0;
  for (uint32_t i = 0; i < count && i < 8; ++i) used += snprintf(out + used, size - used, "%s%" PRId64, i ? " " : "", ids[i]);
}

static int applicable_all(int n, char** graphs) {
  void* handle = NULL;
  if (api.create(&handle) != 0) die("create", last_error());
  for (int i = 0; i < n; ++i) {
    const_data graph = read_file(graphs[i]);
    char line[4096];
    applicable(handle, &graph, line, sizeof line);
    printf("%s: %s\n", graphs[i], line);
    free((void*)graph.ptr);
  }
  return api.destroy(handle) != 0;
}

#define REFUSE(call, what)                                         \
  do {                                                             \
    status_t s_ = (call);                                          \
    if (s_ != 0) {                                                 \
      printf("refused %s %d: %s\n", what, s_, last_error());       \
      return 0;                                                    \
    }                                                              \
  } while (0)

static int run(char** argv, int argc) {
  const_data graph = read_file(argv[0]), config = read_file(argv[1]);
  const char* details_path = argv[2];
  int64_t out_uid = strtoll(argv[3], NULL, 10);
  const char* out_path = argv[4];
  size_t out_bytes = strtoull(argv[5], NULL, 10);
  void* handle = NULL;
  REFUSE(api.create(&handle), "create");
  uint32_t count = 0;
  REFUSE(api.get_all_engine_ids(NULL, 0, &count), "all engine ids");
  REFUSE(api.set_stream(handle, NULL), "set stream");
  int64_t ids[8];
  uint32_t found = 0;
  REFUSE(api.get_applicable_engine_ids(handle, &graph, ids, 8, &found), "applicable engine ids");
  printf("applicable %u\n", found);
  const_data details = {NULL, 0};
  if (found > 0) {
    REFUSE(api.get_engine_details(handle, ids[0], &graph, &details), "engine details");
    write_file(details_path, details.ptr, details.size);
    REFUSE(api.destroy_engine_details(handle, &details), "destroy engine details");
    if (details.ptr != NULL || details.size != 0) die("destroyed details not zeroed", NULL);
  }
  size_t workspace_size = 0, from_context = 0;
  REFUSE(api.get_workspace_size(handle, &config, &graph, &workspace_size), "workspace size");
  void* context = NULL;
  REFUSE(api.create_execution_context(handle, &config, &graph, &context), "execution context");
  REFUSE(api.get_workspace_size_from_execution_context(handle, context, &from_context), "context workspace size");
  if (from_context != workspace_size) die("the two workspace sizes differ", NULL);
  printf("workspace %zu\n", workspace_size);
  int n = argc - 6;
  device_buffer* buffers = calloc((size_t)n + 1, sizeof *buffers);
  for (int i = 0; i < n; ++i) {
    char* spec = argv[6 + i];
    char* eq = strchr(spec, '=');
    if (eq == NULL) die("UID=FILE expected", spec);
    *eq = 0;
    buffers[i].uid = strtoll(spec, NULL, 10);
    buffers[i].ptr = (void*)read_file(eq + 1).ptr;
  }
  buffers[n].uid = out_uid;
  buffers[n].ptr = calloc(out_bytes ? out_bytes : 1, 1);
  /* The workspace the plugin asked, then a guard: both filled with a pattern, so that what the run
     wrote shows (the highest byte it changed) and a write past the workspace fails the run. */
  enum { GUARD = 4096, PATTERN = 0xA5 };
  unsigned char* workspace = malloc(workspace_size + GUARD);
  memset(workspace, PATTERN, workspace_size + GUARD);
  REFUSE(api.execute_op_graph(handle, context, workspace_size ? workspace : NULL, buffers, (uint32_t)n + 1), "execute");
  size_t used = 0;
  for (size_t i = 0; i < workspace_size + GUARD; ++i)
    if (workspace[i] != PATTERN) used = i + 1;
  if (used > workspace_size) die("the run wrote past the workspace it asked for", NULL);
  printf("workspace used %zu\n", used);
  free(workspace);
  write_file(out_path, buffers[n].ptr, out_bytes);
  REFUSE(api.destroy_execution_context(handle, context), "destroy execution context");
  REFUSE(api.destroy(handle), "destroy");
  printf("executed\n");
  return 0;
}

struct thread_work {
  int rounds, n;
  const_data* graphs;
  char (*answers)[4096];
  int differ;
};

static void* thread_main(void* arg) {
  struct thread_work* w = arg;
  void* handle = NULL;
  if (api.create(&handle) != 0) die("create", NULL);
  for (int r = 0; r < w->rounds; ++r)
    for (int i = 0; i < w->n; ++i) {
      char line[4096];
      applicable(handle, &w->graphs[i], line, sizeof line);
      if (strcmp(line, w->answers[i]) != 0) w->differ += 1;
    }
  api.destroy(handle);
  return NULL;
}

static int threads(int rounds, int n, char** paths) {
  const_data* graphs = calloc((size_t)n, sizeof *graphs);
  char (*answers)[4096] = calloc((size_t)n, sizeof *answers);
  void* handle = NULL;
  if (api.create(&handle) != 0) die("create", NULL);
  for (int i = 0; i < n; ++i) {
    graphs[i] = read_file(paths[i]);
    applicable(handle, &graphs[i], answers[i], sizeof answers[i]);
  }
  api.destroy(handle);
  struct thread_work work[2] = {{rounds, n, graphs, answers, 0}, {rounds, n, graphs, answers, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, thread_main, &work[i]);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  if (work[0].differ || work[1].differ) {
    printf("threads differ %d %d\n", work[0].differ, work[1].differ);
    return 1;
  }
  printf("threads agree %d\n", rounds * n * 2);
  return 0;
}

static int timed(int rounds, int n, char** paths) {
  void* handle = NULL;
  if (api.set_log_level != NULL && api.set_log_level(1) != 0) die("log level", NULL); /* warnings up: no line per decline */
  if (api.create(&handle) != 0) die("create", NULL);
  for (int i = 0; i < n; ++i) {
    const_data graph = read_file(paths[i]);
    char line[4096];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int r = 0; r < rounds; ++r) applicable(handle, &graph, line, sizeof line);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ns = ((double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec)) / rounds;
    printf("%s: %.0f ns\n", paths[i], ns);
    free((void*)graph.ptr);
  }
  return api.destroy(handle) != 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 3) die("usage: harness PLUGIN check|applicable|run|threads ...", NULL);
  load(argv[1]);
  if (api.set_logging_callback != NULL && api.set_logging_callback(on_log) != 0) die("logging callback", NULL);
  if (strcmp(argv[2], "check") == 0) return check();
  if (strcmp(argv[2], "applicable") == 0) return applicable_all(argc - 3, argv + 3);
  if (strcmp(argv[2], "run") == 0 && argc >= 9) return run(argv + 3, argc - 3);
  if (strcmp(argv[2], "threads") == 0 && argc >= 5) return threads(atoi(argv[3]), argc - 4, argv + 4);
  if (strcmp(argv[2], "time") == 0 && argc >= 5) return timed(atoi(argv[3]), argc - 4, argv + 4);
  die("unknown mode", argv[2]);
  return 1;
}
