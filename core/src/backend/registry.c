/* Backend registry: the built-in CPU backend and plugin modules found with dlopen.
 *
 * A module is searched, in order, in: every folder of METRALE_BACKEND_PATH (colon
 * separated), the folder of the running executable, <that folder>/../lib/metrale, and
 * the installation's backend folder.  Loaded modules stay loaded for the life of the
 * process (the backends they create point into them). */
#define _GNU_SOURCE
#include "registry.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_backend.h"

#ifndef METRALE_INSTALL_BACKEND_DIR
#define METRALE_INSTALL_BACKEND_DIR "/usr/local/lib/metrale"
#endif
#ifndef METRALE_BUILT_CUDA
#define METRALE_BUILT_CUDA 0
#endif
#ifndef METRALE_BUILT_HIP
#define METRALE_BUILT_HIP 0
#endif
#ifndef METRALE_BUILT_VULKAN
#define METRALE_BUILT_VULKAN 0
#endif

/* One line per backend: porting to a new GPU adds a line here.  Preference for `auto`
 * comes from each module's score; this order only breaks ties. */
static const struct known_backend {
  const char *name;
  int built;
  const gpu_backend_module *(*builtin)(void);
} known[] = {
    {"cuda", METRALE_BUILT_CUDA, NULL},
    {"hip", METRALE_BUILT_HIP, NULL},
    {"vulkan", METRALE_BUILT_VULKAN, NULL},
    {"cpu", 1, cpu_backend_module},
};
#define N_KNOWN (sizeof known / sizeof known[0])

size_t metrale_backend_count(void) { return N_KNOWN; }

const char *metrale_backend_name(size_t i) { return i < N_KNOWN ? known[i].name : NULL; }

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int tried;
  const gpu_backend_module *module;
  char path[512];
  char error[512];
} cache[N_KNOWN];

static void exe_dir(char *buf, size_t cap) {
  buf[0] = '\0';
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return;
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  if (!slash) return;
  *slash = '\0';
  snprintf(buf, cap, "%s", path);
}

metrale_status metrale_backend_module_load(const char *path, const gpu_backend_module **out_module) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) return METRALE_ERROR(UNAVAILABLE, "cannot load %s: %s", path, dlerror());
  metrale_backend_entry_fn entry = (metrale_backend_entry_fn)(uintptr_t)dlsym(handle, METRALE_BACKEND_ENTRY_SYMBOL);
  if (!entry) {
    dlclose(handle);
    return METRALE_ERROR(FAILED_PRECONDITION, "%s does not export %s: not a metrale backend module",
                         path, METRALE_BACKEND_ENTRY_SYMBOL);
  }
  const gpu_backend_module *m = entry();
  if (!m) {
    dlclose(handle);
    return METRALE_ERROR(FAILED_PRECONDITION, "%s: %s() returned no module", path,
                         METRALE_BACKEND_ENTRY_SYMBOL);
  }
  if (m->api_version != METRALE_BACKEND_API_VERSION) {
    uint32_t v = m->api_version;
    dlclose(handle);
    return METRALE_ERROR(FAILED_PRECONDITION,
                         "%s was built for backend API version %u, this metrale needs %u: rebuild it",
                         path, v, METRALE_BACKEND_API_VERSION);
  }
  if (!m->name || !m->create) {
    dlclose(handle);
    return METRALE_ERROR(FAILED_PRECONDITION, "%s: module has no name or create()", path);
  }
  *out_module = m; /* the handle is deliberately kept open */
  return METRALE_OK;
}

/* Tries each search folder; fills path/error of the cache entry. */
static void find_module(size_t i) {
  char file[64];
  snprintf(file, sizeof file, "libmetrale-backend-%s.so", known[i].name);
  char dirs[8][PATH_MAX];
  size_t nd = 0;
  const char *env = getenv("METRALE_BACKEND_PATH");
  if (env && *env) {
    const char *s = env;
    while (*s && nd < 5) {
      const char *e = strchr(s, ':');
      size_t len = e ? (size_t)(e - s) : strlen(s);
      if (len > 0 && len < PATH_MAX) {
        memcpy(dirs[nd], s, len);
        dirs[nd++][len] = '\0';
      }
      if (!e) break;
      s = e + 1;
    }
  }
  char exe[PATH_MAX];
  exe_dir(exe, sizeof exe);
  if (exe[0]) {
    snprintf(dirs[nd++], PATH_MAX, "%s", exe);
    snprintf(dirs[nd++], PATH_MAX, "%.*s/../lib/metrale", PATH_MAX - 20, exe);
  }
  snprintf(dirs[nd++], PATH_MAX, "%s", METRALE_INSTALL_BACKEND_DIR);

  char searched[1024] = "";
  for (size_t d = 0; d < nd; d++) {
    char path[PATH_MAX + 64];
    /* return values checked: gcc -O3 rejects (-Werror=format-truncation) unchecked ones */
    if (snprintf(path, sizeof path, "%s/%s", dirs[d], file) >= (int)sizeof path) continue;
    if (access(path, F_OK) != 0) {
      size_t used = strlen(searched);
      if (snprintf(searched + used, sizeof searched - used, "%s%s", used ? ", " : "", dirs[d]) < 0)
        searched[used] = '\0';
      continue;
    }
    if (snprintf(cache[i].path, sizeof cache[i].path, "%s", path) < 0) cache[i].path[0] = '\0';
    metrale_status s = metrale_backend_module_load(path, &cache[i].module);
    if (s) {
      snprintf(cache[i].error, sizeof cache[i].error, "%s", metrale_status_message(s));
      metrale_status_free(s);
    }
    return;
  }
  char upper[16];
  size_t n = 0;
  for (; known[i].name[n] && n + 1 < sizeof upper; n++) upper[n] = (char)(known[i].name[n] - 'a' + 'A');
  upper[n] = '\0';
  if (known[i].built)
    snprintf(cache[i].error, sizeof cache[i].error, "module missing: %s not found in %s", file, searched);
  else
    snprintf(cache[i].error, sizeof cache[i].error,
             "not built into this installation (configure with -DMETRALE_%s=ON): %s not found in %s",
             upper, file, searched);
}

static int known_index(const char *name) {
  for (size_t i = 0; i < N_KNOWN; i++)
    if (strcmp(known[i].name, name) == 0) return (int)i;
  return -1;
}

metrale_status metrale_backend_module_get(const char *name, const gpu_backend_module **out_module,
                                          const char **out_path) {
  int i = known_index(name);
  if (i < 0) {
    return METRALE_ERROR(INVALID_ARGUMENT,
                         "unknown backend '%s' (known: auto, cuda, hip, vulkan, cpu)", name);
  }
  pthread_mutex_lock(&cache_lock);
  if (!cache[i].tried) {
    cache[i].tried = 1;
    if (known[i].builtin)
      cache[i].module = known[i].builtin();
    else
      find_module((size_t)i);
  }
  const gpu_backend_module *m = cache[i].module;
  char error[512];
  snprintf(error, sizeof error, "%s", cache[i].error);
  if (out_path) *out_path = cache[i].path;
  pthread_mutex_unlock(&cache_lock);
  if (!m) return METRALE_ERROR(UNAVAILABLE, "backend %s unavailable: %s", name, error);
  *out_module = m;
  return METRALE_OK;
}

int metrale_backend_built(const char *name) {
  int i = known_index(name);
  return i >= 0 && known[i].built;
}

void metrale_backend_probe(const char *name, metrale_backend_report *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", name);
  out->built = metrale_backend_built(name);
  const gpu_backend_module *m = NULL;
  const char *path = NULL;
  metrale_status s = metrale_backend_module_get(name, &m, &path);
  if (path) snprintf(out->module_path, sizeof out->module_path, "%s", path);
  if (s) {
    /* the report already names the backend: drop the "backend X unavailable: " prefix */
    const char *msg = metrale_status_message(s), *colon = strstr(msg, "unavailable: ");
    snprintf(out->reason, sizeof out->reason, "%s", colon ? colon + 13 : msg);
    metrale_status_free(s);
    return;
  }
  out->score = m->score;
  if (m->describe) {
    metrale_status ds = m->describe(out->targets, sizeof out->targets);
    if (ds) snprintf(out->targets, sizeof out->targets, "(describe failed: %s)", metrale_status_message(ds));
    metrale_status_free(ds);
  }
  gpu_backend_options opts = {0};
  gpu_backend *be = NULL;
  s = m->create(&opts, &be);
  if (s) {
    snprintf(out->reason, sizeof out->reason, "%s", metrale_status_message(s));
    metrale_status_free(s);
    return;
  }
  out->available = 1;
  snprintf(out->reason, sizeof out->reason, "%s", be->caps.device_name);
  be->vt->destroy(be);
}
