/* A checkpoint folder: model.safetensors, or shards named by model.safetensors.index.json.
 * Shards are opened (mapped and validated) eagerly: mapping costs no memory, and a
 * broken checkpoint is reported at open rather than halfway through a load. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint_internal.h"

static char *join(const char *dir, const char *name) {
  size_t dl = strlen(dir), nl = strlen(name);
  int sep = dl > 0 && dir[dl - 1] != '/';
  char *p = malloc(dl + (size_t)sep + nl + 1);
  if (!p) return NULL;
  memcpy(p, dir, dl);
  if (sep) p[dl] = '/';
  memcpy(p + dl + (size_t)sep, name, nl + 1);
  return p;
}

static int entry_cmp(const void *a, const void *b) {
  return strcmp(((const ckpt_entry *)a)->name, ((const ckpt_entry *)b)->name);
}

static metrale_status add_shard(metrale_checkpoint *c, const char *file, uint32_t *out_index) {
  for (uint32_t i = 0; i < c->nshards; i++) {
    if (strcmp(c->shard_names[i], file) == 0) {
      *out_index = i;
      return METRALE_OK;
    }
  }
  char *path = join(c->dir, file);
  char *name = strdup(file);
  if (!path || !name) {
    free(path);
    free(name);
    return METRALE_ERROR(OUT_OF_MEMORY, "shard name");
  }
  metrale_safetensors *f = NULL;
  metrale_status s = metrale_safetensors_open(path, &f);
  free(path);
  if (s) {
    free(name);
    return s;
  }
  c->shards[c->nshards] = f;
  c->shard_names[c->nshards] = name;
  *out_index = c->nshards++;
  return METRALE_OK;
}

/* A shard must be a file of dir itself: no folders, no way out of it. */
static int plain_file_name(const char *s) {
  return s[0] && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static metrale_status load_index(metrale_checkpoint *c, const char *index_path) {
  char *text = NULL;
  size_t len = 0;
  METRALE_RETURN_IF_ERROR(metrale_read_small_file(index_path, METRALE_JSON_MAX_BYTES, &text, &len));
  json_error_t err;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
  free(text);
  if (!root)
    return METRALE_ERROR(DATA_LOSS, "%s: not valid JSON (line %d, column %d: %s)", index_path,
                         err.line, err.column, err.text);
  metrale_status s = METRALE_OK;
  json_t *map = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
  size_t n = json_object_size(map);
  if (!json_is_object(root)) {
    s = METRALE_ERROR(DATA_LOSS, "%s: not a JSON object", index_path);
  } else if (!json_is_object(map)) {
    s = METRALE_ERROR(DATA_LOSS, "%s: no \"weight_map\" object", index_path);
  } else if (n == 0) {
    s = METRALE_ERROR(DATA_LOSS, "%s: \"weight_map\" names no tensor", index_path);
  } else {
    c->entries = calloc(n, sizeof *c->entries);
    c->shards = calloc(n, sizeof *c->shards); /* at most one shard per tensor */
    c->shard_names = calloc(n, sizeof *c->shard_names);
    if (!c->entries || !c->shards || !c->shard_names)
      s = METRALE_ERROR(OUT_OF_MEMORY, "%s: %zu entries", index_path, n);
  }
  const char *key;
  json_t *value;
  json_t *walk = s ? NULL : map; /* NULL: the loop does not run */
  json_object_foreach(walk, key, value) {
    const char *file = json_string_value(value);
    if (!key[0]) {
      s = METRALE_ERROR(DATA_LOSS, "%s: weight_map has an empty tensor name", index_path);
    } else if (!file) {
      s = METRALE_ERROR(DATA_LOSS, "%s: weight_map entry '%.200s' is not a file name string",
                        index_path, key);
    } else if (!plain_file_name(file)) {
      s = METRALE_ERROR(DATA_LOSS,
                        "%s: weight_map entry '%.200s' names shard '%.200s', which is not a "
                        "plain file name inside the checkpoint folder",
                        index_path, key, file);
    } else {
      uint32_t shard = 0;
      s = add_shard(c, file, &shard);
      if (s) {
        s = metrale_status_annotate(s, "%s: shard of '%.200s'", index_path, key);
      } else if (!metrale_safetensors_find(c->shards[shard], key)) {
        s = METRALE_ERROR(NOT_FOUND, "%s: weight_map puts '%.200s' in %s, which has no such tensor",
                          index_path, key, file);
      } else {
        ckpt_entry *e = &c->entries[c->nentries];
        e->name = strdup(key);
        e->shard = shard;
        if (!e->name) s = METRALE_ERROR(OUT_OF_MEMORY, "tensor name");
        else c->nentries++;
      }
    }
    if (s) break;
  }
  json_decref(root);
  if (!s) qsort(c->entries, c->nentries, sizeof *c->entries, entry_cmp);
  return s;
}

static metrale_status load_single(metrale_checkpoint *c, const char *path) {
  c->shards = calloc(1, sizeof *c->shards);
  c->shard_names = calloc(1, sizeof *c->shard_names);
  if (!c->shards || !c->shard_names) return METRALE_ERROR(OUT_OF_MEMORY, "checkpoint");
  uint32_t shard = 0;
  METRALE_RETURN_IF_ERROR(add_shard(c, "model.safetensors", &shard));
  size_t n = metrale_safetensors_count(c->shards[0]);
  c->entries = calloc(n ? n : 1, sizeof *c->entries);
  if (!c->entries) return METRALE_ERROR(OUT_OF_MEMORY, "%s: %zu entries", path, n);
  for (size_t i = 0; i < n; i++) {
    c->entries[i].name = strdup(metrale_safetensors_at(c->shards[0], i)->name);
    if (!c->entries[i].name) return METRALE_ERROR(OUT_OF_MEMORY, "tensor name");
    c->nentries++;
  }
  qsort(c->entries, c->nentries, sizeof *c->entries, entry_cmp);
  return METRALE_OK;
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 || errno != ENOENT;
}

metrale_status metrale_checkpoint_open(const char *dir, metrale_checkpoint **out_ckpt) {
  if (!dir || !out_ckpt) return METRALE_ERROR(INVALID_ARGUMENT, "checkpoint_open: NULL argument");
  struct stat st;
  if (stat(dir, &st) != 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR)
      return METRALE_ERROR(NOT_FOUND, "%s: no such checkpoint folder", dir);
    return METRALE_ERROR(IO, "%s: checkpoint folder: %s", dir, strerror(e));
  }
  if (!S_ISDIR(st.st_mode)) return METRALE_ERROR(IO, "%s: not a folder", dir);
  metrale_checkpoint *c = calloc(1, sizeof *c);
  if (c) c->dir = strdup(dir);
  char *index = join(dir, "model.safetensors.index.json");
  char *single = join(dir, "model.safetensors");
  metrale_status s = METRALE_OK;
  if (!c || !c->dir || !index || !single)
    s = METRALE_ERROR(OUT_OF_MEMORY, "%s: checkpoint", dir);
  else if (exists(index))
    s = load_index(c, index);
  else if (exists(single))
    s = load_single(c, single);
  else
    s = METRALE_ERROR(NOT_FOUND, "%s: neither model.safetensors.index.json nor model.safetensors exists",
                      dir);
  free(index);
  free(single);
  if (s) {
    metrale_checkpoint_close(c);
    return s;
  }
  *out_ckpt = c;
  return METRALE_OK;
}

void metrale_checkpoint_close(metrale_checkpoint *c) {
  if (!c) return;
  for (size_t i = 0; i < c->nentries; i++) free(c->entries[i].name);
  for (uint32_t i = 0; i < c->nshards; i++) {
    metrale_safetensors_close(c->shards[i]);
    free(c->shard_names[i]);
  }
  free(c->entries);
  free(c->shards);
  free(c->shard_names);
  free(c->bounce);
  free(c->dir);
  free(c);
}

metrale_status metrale_checkpoint_lookup(metrale_checkpoint *c, const char *name,
                                         metrale_safetensors **out_file,
                                         const metrale_tensor_info **out_info) {
  if (!c || !name) return METRALE_ERROR(INVALID_ARGUMENT, "checkpoint_find: NULL argument");
  ckpt_entry key = {.name = (char *)name};
  const ckpt_entry *e = c->nentries
                            ? bsearch(&key, c->entries, c->nentries, sizeof *e, entry_cmp)
                            : NULL;
  const metrale_tensor_info *t = e ? metrale_safetensors_find(c->shards[e->shard], name) : NULL;
  if (!t) return METRALE_ERROR(NOT_FOUND, "tensor '%s' is not in checkpoint %s", name, c->dir);
  if (out_file) *out_file = c->shards[e->shard];
  *out_info = t;
  return METRALE_OK;
}

metrale_status metrale_checkpoint_find(metrale_checkpoint *c, const char *name,
                                       const metrale_tensor_info **out_info) {
  if (!out_info) return METRALE_ERROR(INVALID_ARGUMENT, "checkpoint_find: NULL argument");
  return metrale_checkpoint_lookup(c, name, NULL, out_info);
}
