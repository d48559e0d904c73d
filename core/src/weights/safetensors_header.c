/* Validation of a safetensors JSON header: the file is hostile until every field checks. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "weights_internal.h"

/* A tensor as parsed, before the offsets are known to tile the data area. */
typedef struct entry {
  const char *name; /* the JSON key, alive while the document is */
  metrale_dtype dtype;
  uint32_t ndim;
  uint64_t shape[METRALE_MAX_DIMS];
  uint64_t nbytes, begin, end;
} entry;

static int by_offset(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1; /* empty tensors first */
  return strcmp(x->name, y->name);
}

static int info_by_name(const void *a, const void *b) {
  const metrale_tensor_info *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

/* A JSON integer in [0, INT64_MAX]. */
static int get_u64(const json_t *v, uint64_t *out) {
  if (!json_is_integer(v)) return 0;
  json_int_t i = json_integer_value(v);
  if (i < 0) return 0;
  *out = (uint64_t)i;
  return 1;
}

static metrale_status check_metadata(const json_t *meta) {
  if (!json_is_object(meta))
    return METRALE_ERROR(DATA_LOSS, "\"__metadata__\" is not a JSON object");
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)meta, key, value) {
    if (!json_is_string(value))
      return METRALE_ERROR(DATA_LOSS, "\"__metadata__\" entry '%.200s' is not a string", key);
  }
  return METRALE_OK;
}

static metrale_status parse_entry(const char *name, const json_t *obj, entry *e) {
  if (name[0] == '\0') return METRALE_ERROR(DATA_LOSS, "a tensor has an empty name");
  if (!json_is_object(obj))
    return METRALE_ERROR(DATA_LOSS, "tensor '%.200s': entry is not a JSON object", name);
  const json_t *dtype = json_object_get(obj, "dtype");
  const json_t *shape = json_object_get(obj, "shape");
  const json_t *offs = json_object_get(obj, "data_offsets");
  if (!dtype || !shape || !offs || json_object_size(obj) != 3)
    return METRALE_ERROR(DATA_LOSS,
                         "tensor '%.200s': entry must hold exactly dtype, shape and data_offsets",
                         name);
  e->name = name;

  if (!json_is_string(dtype))
    return METRALE_ERROR(DATA_LOSS, "tensor '%.200s': dtype is not a string", name);
  e->dtype = metrale_dtype_parse(json_string_value(dtype));
  if (!e->dtype)
    return METRALE_ERROR(DATA_LOSS,
                         "tensor '%.200s': unsupported dtype '%.32s' (metrale reads BF16, F16, "
                         "F32 and I32)",
                         name, json_string_value(dtype));

  if (!json_is_array(shape))
    return METRALE_ERROR(DATA_LOSS, "tensor '%.200s': shape is not a JSON array", name);
  size_t ndim = json_array_size(shape);
  if (ndim > METRALE_MAX_DIMS)
    return METRALE_ERROR(DATA_LOSS, "tensor '%.200s': %zu dimensions, at most %d are supported",
                         name, ndim, METRALE_MAX_DIMS);
  e->ndim = (uint32_t)ndim;
  uint64_t nbytes = metrale_dtype_size(e->dtype);
  for (size_t d = 0; d < ndim; d++) {
    if (!get_u64(json_array_get(shape, d), &e->shape[d]))
      return METRALE_ERROR(DATA_LOSS,
                           "tensor '%.200s': shape[%zu] is not a non-negative integer", name, d);
    if (!metrale_mul_u64(nbytes, e->shape[d], &nbytes))
      return METRALE_ERROR(DATA_LOSS, "tensor '%.200s': shape overflows 64-bit byte counts",
                           name);
  }
  e->nbytes = nbytes;

  if (!json_is_array(offs) || json_array_size(offs) != 2 ||
      !get_u64(json_array_get(offs, 0), &e->begin) || !get_u64(json_array_get(offs, 1), &e->end))
    return METRALE_ERROR(DATA_LOSS,
                         "tensor '%.200s': data_offsets is not [begin, end] of non-negative "
                         "integers",
                         name);
  if (e->end < e->begin)
    return METRALE_ERROR(DATA_LOSS, "tensor '%.200s': data_offsets end %llu is before begin %llu",
                         name, (unsigned long long)e->end, (unsigned long long)e->begin);
  if (e->end - e->begin != e->nbytes)
    return METRALE_ERROR(DATA_LOSS,
                         "tensor '%.200s': data_offsets span %llu bytes but %s shape needs %llu",
                         name, (unsigned long long)(e->end - e->begin),
                         metrale_dtype_name(e->dtype), (unsigned long long)e->nbytes);
  return METRALE_OK;
}

/* Sorted entries must tile [0, data_len) exactly: no gap, no overlap, nothing after. */
static metrale_status check_tiling(const entry *es, size_t n, uint64_t data_len) {
  uint64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (es[i].begin > at)
      return METRALE_ERROR(DATA_LOSS, "tensor '%.200s': gap of %llu bytes before its data",
                           es[i].name, (unsigned long long)(es[i].begin - at));
    if (es[i].begin < at)
      return METRALE_ERROR(DATA_LOSS, "tensor '%.200s': data overlaps the previous tensor",
                           es[i].name);
    at = es[i].end;
    if (at > data_len)
      return METRALE_ERROR(DATA_LOSS,
                           "tensor '%.200s': data ends at %llu, past the %llu bytes of data in "
                           "the file",
                           es[i].name, (unsigned long long)at, (unsigned long long)data_len);
  }
  if (at != data_len)
    return METRALE_ERROR(DATA_LOSS, "%llu trailing bytes after the last tensor",
                         (unsigned long long)(data_len - at));
  return METRALE_OK;
}

/* Moves the validated entries into f. */
static metrale_status build(struct metrale_safetensors *f, const entry *es, size_t n) {
  size_t names_len = 1;
  for (size_t i = 0; i < n; i++) names_len += strlen(es[i].name) + 1;
  f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
  f->begin = calloc(n ? n : 1, sizeof *f->begin);
  f->by_name = calloc(n ? n : 1, sizeof *f->by_name);
  f->names = malloc(names_len);
  if (!f->tensors || !f->begin || !f->by_name || !f->names)
    return METRALE_ERROR(OUT_OF_MEMORY, "tensor table of %zu entries", n);
  char *p = f->names;
  for (size_t i = 0; i < n; i++) {
    metrale_tensor_info *t = &f->tensors[i];
    size_t len = strlen(es[i].name) + 1;
    memcpy(p, es[i].name, len);
    t->name = p;
    p += len;
    t->dtype = es[i].dtype;
    t->ndim = es[i].ndim;
    memcpy(t->shape, es[i].shape, sizeof t->shape);
    t->nbytes = es[i].nbytes;
    f->begin[i] = es[i].begin;
    f->by_name[i] = t;
  }
  if (n > 1) qsort(f->by_name, n, sizeof *f->by_name, info_by_name);
  f->count = n;
  return METRALE_OK;
}

metrale_status metrale_safetensors_parse_header(struct metrale_safetensors *f,
                                                const char *json, size_t len) {
  json_error_t err;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
  if (!root)
    return METRALE_ERROR(DATA_LOSS, "header is not valid JSON (line %d, column %d: %s)", err.line,
                         err.column, err.text);
  metrale_status s = METRALE_OK;
  entry *es = NULL;
  if (!json_is_object(root)) {
    s = METRALE_ERROR(DATA_LOSS, "header is not a JSON object");
    goto done;
  }
  es = calloc(json_object_size(root) + 1, sizeof *es);
  if (!es) {
    s = METRALE_ERROR(OUT_OF_MEMORY, "header of %zu entries", json_object_size(root));
    goto done;
  }
  size_t n = 0;
  const char *key;
  json_t *value;
  json_object_foreach(root, key, value) {
    if (strcmp(key, "__metadata__") == 0)
      s = check_metadata(value);
    else
      s = parse_entry(key, value, &es[n++]);
    if (s) goto done;
  }
  if (n > 1) qsort(es, n, sizeof *es, by_offset);
  s = check_tiling(es, n, f->data_len);
  if (!s) s = build(f, es, n);
done:
  free(es);
  json_decref(root);
  return s;
}
