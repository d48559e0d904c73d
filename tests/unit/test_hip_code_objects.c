/* The HIP module carries what it claims, for every target it was built for.
 *
 * describe() lists per target the kernels that llvm-readelf found in each code object
 * at build time (backends/hip/hip_embed.cmake).  This test checks those lists against
 * the bytes the module embeds with its own readers: the clang offload bundle (what
 * hipModuleLoadData is given) is split into its entries, and each code object's ELF
 * symbol tables are searched for the kernel entry (FUNC) and its descriptor <name>.kd
 * (OBJECT).  No AMD GPU is needed: nothing is loaded into a runtime. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "metrale/gpu_backend.h"
#include "metrale/manifest.h"
#include "registry.h"

#ifdef METRALE_HIP_TEST_IMAGES
#include "hip_images.h"

#define MAX_TARGETS 16
#define MAX_NAME 64

static uint64_t rd(const unsigned char *p, unsigned n) { /* little endian */
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* One entry of a clang offload bundle. */
typedef struct bundle_entry {
  char id[128]; /* "hipv4-amdgcn-amd-amdhsa--gfx90a" */
  const unsigned char *data;
  uint64_t size;
} bundle_entry;

/* Splits a bundle: "__CLANG_OFFLOAD_BUNDLE__", u64 count, then per entry u64 offset,
 * u64 size, u64 id length and the id. */
static size_t bundle_entries(const unsigned char *b, size_t size, bundle_entry *out, size_t cap) {
  static const char magic[] = "__CLANG_OFFLOAD_BUNDLE__";
  cr_assert_geq(size, 32u, "bundle of %zu bytes", size);
  cr_assert(memcmp(b, magic, 24) == 0, "not a clang offload bundle");
  uint64_t n = rd(b + 24, 8);
  cr_assert(n >= 1 && n <= cap, "bundle with %llu entries", (unsigned long long)n);
  size_t at = 32;
  for (uint64_t i = 0; i < n; i++) {
    cr_assert_leq(at + 24, size, "bundle entry table overruns the bundle");
    uint64_t off = rd(b + at, 8), len = rd(b + at + 8, 8), idlen = rd(b + at + 16, 8);
    at += 24;
    cr_assert(idlen < sizeof out[i].id && at + idlen <= size, "bundle entry id of %llu bytes",
              (unsigned long long)idlen);
    memcpy(out[i].id, b + at, idlen);
    out[i].id[idlen] = '\0';
    at += idlen;
    cr_assert(off <= size && len <= size - off, "bundle entry %s overruns the bundle", out[i].id);
    out[i].data = b + off;
    out[i].size = len;
  }
  return (size_t)n;
}

/* A code object's ELF: checked header, then symbol lookups. */
typedef struct elf {
  const unsigned char *p;
  uint64_t size, shoff;
  unsigned shnum, shentsize;
} elf;

static void elf_open(elf *e, const unsigned char *p, uint64_t size, const char *what) {
  cr_assert_geq(size, 64u, "%s: %llu bytes is no ELF", what, (unsigned long long)size);
  cr_assert(p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F', "%s: not an ELF", what);
  cr_assert_eq(p[4], 2, "%s: not a 64-bit ELF", what);
  cr_assert_eq(p[5], 1, "%s: not little endian", what);
  cr_assert_eq(rd(p + 18, 2), 224u, "%s: e_machine %llu is not EM_AMDGPU", what,
               (unsigned long long)rd(p + 18, 2));
  e->p = p;
  e->size = size;
  e->shoff = rd(p + 40, 8);
  e->shentsize = (unsigned)rd(p + 58, 2);
  e->shnum = (unsigned)rd(p + 60, 2);
  cr_assert(e->shentsize >= 64 && e->shoff <= size && (uint64_t)e->shnum * e->shentsize <= size - e->shoff,
            "%s: section headers out of bounds", what);
}

static const unsigned char *section(const elf *e, unsigned i) {
  return e->p + e->shoff + (uint64_t)i * e->shentsize;
}

/* 1 when a symbol table defines `name` as a GLOBAL symbol of `type` (1 OBJECT, 2 FUNC). */
static int elf_defines(const elf *e, const char *name, unsigned type) {
  for (unsigned s = 0; s < e->shnum; s++) {
    const unsigned char *sh = section(e, s);
    unsigned sh_type = (unsigned)rd(sh + 4, 4);
    if (sh_type != 2 && sh_type != 11) continue; /* SHT_SYMTAB, SHT_DYNSYM */
    uint64_t off = rd(sh + 24, 8), len = rd(sh + 32, 8), entsize = rd(sh + 56, 8);
    unsigned link = (unsigned)rd(sh + 40, 4);
    cr_assert(entsize >= 24 && off <= e->size && len <= e->size - off && link < e->shnum,
              "symbol table out of bounds");
    const unsigned char *str = section(e, link);
    uint64_t soff = rd(str + 24, 8), slen = rd(str + 32, 8);
    cr_assert(soff <= e->size && slen <= e->size - soff, "string table out of bounds");
    for (uint64_t at = off; at + entsize <= off + len; at += entsize) {
      const unsigned char *sym = e->p + at;
      uint64_t nm = rd(sym, 4);
      unsigned info = sym[4], shndx = (unsigned)rd(sym + 6, 2);
      if (nm >= slen || shndx == 0) continue; /* undefined */
      const char *sname = (const char *)e->p + soff + nm;
      if ((info & 0xf) == type && (info >> 4) == 1 && strnlen(sname, slen - nm) < slen - nm &&
          strcmp(sname, name) == 0)
        return 1;
    }
  }
  return 0;
}

/* The code object names its target in its metadata note ("amdgcn-amd-amdhsa--gfx90a"). */
static int elf_names_target(const elf *e, const char *target) {
  char needle[MAX_NAME + 32];
  snprintf(needle, sizeof needle, "amdgcn-amd-amdhsa--%s", target);
  size_t n = strlen(needle);
  for (uint64_t i = 0; i + n < e->size; i++) {
    if (memcmp(e->p + i, needle, n) != 0) continue;
    unsigned char next = e->p[i + n]; /* not "gfx90" of "gfx90a", nor "gfx94" of "gfx940" */
    if (!isalnum(next)) return 1;
  }
  return 0;
}

/* The code object of `target` in a module's bundle, or NULL. */
static const bundle_entry *entry_for(const bundle_entry *entries, size_t n, const char *target) {
  char id[MAX_NAME + 32];
  snprintf(id, sizeof id, "hipv4-amdgcn-amd-amdhsa--%s", target);
  for (size_t i = 0; i < n; i++)
    if (strcmp(entries[i].id, id) == 0) return &entries[i];
  return NULL;
}

/* Does the code object of `target` hold manifest kernel `info`?  Read from the bytes. */
static int object_has(const metrale_kernel_info *info, const char *target) {
  for (unsigned m = 0; m < hip_image_count; m++) {
    const hip_image *img = hip_images[m];
    if (strcmp(img->module, info->module) != 0) continue;
    bundle_entry entries[MAX_TARGETS + 1];
    size_t n = bundle_entries(img->bundle, img->size, entries, MAX_TARGETS + 1);
    const bundle_entry *be = entry_for(entries, n, target);
    cr_assert_not_null(be, "the %s bundle has no %s code object", img->module, target);
    elf e;
    elf_open(&e, be->data, be->size, be->id);
    char kd[MAX_NAME + 4];
    snprintf(kd, sizeof kd, "%s.kd", info->name);
    return elf_defines(&e, info->name, 2) && elf_defines(&e, kd, 1);
  }
  return 0; /* the module is not in the HIP build */
}

/* Splits "a b c" into words; returns how many. */
static size_t words(const char *s, size_t len, char out[][MAX_NAME], size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    while (i < len && s[i] == ' ') i++;
    size_t j = i;
    while (j < len && s[j] != ' ') j++;
    if (j > i) {
      cr_assert_lt(n, cap);
      cr_assert_lt(j - i, (size_t)MAX_NAME);
      memcpy(out[n], s + i, j - i);
      out[n][j - i] = '\0';
      n++;
    }
    i = j;
  }
  return n;
}

static int in(char list[][MAX_NAME], size_t n, const char *w) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i], w) == 0) return 1;
  return 0;
}

static const gpu_backend_module *load_hip(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/libmetrale-backend-hip.so", METRALE_BIN_DIR);
  const gpu_backend_module *m = NULL;
  metrale_status s = metrale_backend_module_load(path, &m);
  cr_assert_eq(s, METRALE_OK, "loading %s: %s", path, metrale_status_message(s));
  cr_assert_not_null(m->describe, "the hip module has no describe()");
  return m;
}

Test(hip_code_objects, every_target_is_in_every_bundle) {
  char expected[MAX_TARGETS][MAX_NAME], required[MAX_TARGETS][MAX_NAME];
  const char *exp = METRALE_HIP_TEST_TARGETS, *req = METRALE_HIP_TEST_REQUIRED_TARGETS;
  size_t ne = words(exp, strlen(exp), expected, MAX_TARGETS);
  size_t nr = words(req, strlen(req), required, MAX_TARGETS);
  for (size_t i = 0; i < nr; i++)
    cr_expect(in(expected, ne, required[i]), "%s is not among the built targets (%s)", required[i], exp);
  cr_assert_eq(hip_target_count, ne, "the module lists %u targets, the build %zu", hip_target_count, ne);
  for (unsigned t = 0; t < hip_target_count; t++)
    cr_expect(in(expected, ne, hip_targets[t]), "module target %s was not configured", hip_targets[t]);
  cr_assert_gt(hip_image_count, 0u, "no kernel module was built");

  for (unsigned m = 0; m < hip_image_count; m++) {
    const hip_image *img = hip_images[m];
    bundle_entry entries[MAX_TARGETS + 1];
    size_t n = bundle_entries(img->bundle, img->size, entries, MAX_TARGETS + 1);
    cr_expect_eq(n, ne + 1, "%s: %zu bundle entries for %zu targets and the host", img->module, n, ne);
    cr_expect_str_eq(entries[0].id, "host-x86_64-unknown-linux", "%s: first entry", img->module);
    for (size_t t = 0; t < ne; t++) {
      const bundle_entry *be = entry_for(entries, n, expected[t]);
      cr_assert_not_null(be, "%s: no code object for %s", img->module, expected[t]);
      elf e;
      elf_open(&e, be->data, be->size, be->id);
      cr_expect(elf_names_target(&e, expected[t]), "%s: the %s code object was built for another target",
                img->module, expected[t]);
    }
  }
}

static int target_index(const char *target) {
  for (unsigned t = 0; t < hip_target_count; t++)
    if (strcmp(hip_targets[t], target) == 0) return (int)t;
  return -1;
}

/* describe() lines: "T: k ..." (what T's code objects hold), "T falls back to F for: k"
 * (an optional kernel T lacks and the manifest fallback the layer takes instead), and
 * "T lacks REQUIRED kernels, the layer cannot run: k ..." (absent required kernels). */
Test(hip_code_objects, describe_lists_exactly_what_the_code_objects_hold) {
  const gpu_backend_module *m = load_hip();
  char text[sizeof ((metrale_backend_report *)0)->targets]; /* what the registry gives it */
  metrale_status s = m->describe(text, sizeof text);
  cr_assert_eq(s, METRALE_OK, "describe: %s", metrale_status_message(s));
  cr_log_info("hip describe():\n%s", text);

  enum { PRESENT = 1, FALLBACK = 2, REQUIRED_ABSENT = 4 };
  static unsigned char said[MAX_TARGETS][METRALE_K_COUNT];
  static char fallback_said[MAX_TARGETS][METRALE_K_COUNT][256];
  memset(said, 0, sizeof said);
  unsigned main_lines[MAX_TARGETS] = {0};
  for (char *line = text; *line;) {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char *colon = memchr(line, ':', len);
    cr_assert_not_null(colon, "describe line without a colon: %.*s", (int)len, line);
    char head[512], target[MAX_NAME];
    snprintf(head, sizeof head, "%.*s", (int)(colon - line), line);
    snprintf(target, sizeof target, "%.*s", (int)strcspn(head, " "), head);
    int t = target_index(target);
    cr_assert_geq(t, 0, "describe names target %s the module was not built for", target);
    static char listed[METRALE_K_COUNT + 1][MAX_NAME];
    size_t nl = words(colon + 1, len - (size_t)(colon + 1 - line), listed, METRALE_K_COUNT + 1);
    const char *fb = strstr(head, " falls back to ");
    unsigned kind = strcmp(head, target) == 0 ? PRESENT
                    : fb                      ? FALLBACK
                    : strstr(head, " lacks REQUIRED") ? REQUIRED_ABSENT
                                                      : 0;
    cr_assert_neq(kind, 0u, "describe line of unknown kind: %.*s", (int)len, line);
    if (kind == PRESENT) main_lines[t]++;
    if (kind == FALLBACK) cr_expect_eq(nl, 1u, "one kernel a fallback line: %s", head);
    for (size_t i = 0; i < nl; i++) {
      const metrale_kernel_info *info = NULL;
      for (int id = 0; id < METRALE_K_COUNT && !info; id++) {
        const metrale_kernel_info *k = metrale_kernel_info_get((metrale_kernel_id)id);
        if (strcmp(k->name, listed[i]) == 0) info = k;
      }
      cr_assert_not_null(info, "describe lists %s, not a kernels.def kernel", listed[i]);
      cr_expect_eq(said[t][info->id] & kind, 0, "%s: %s listed twice", target, listed[i]);
      said[t][info->id] |= (unsigned char)kind;
      if (kind == FALLBACK) { /* head is "T falls back to F for" */
        const char *f = fb + strlen(" falls back to ");
        size_t flen = strlen(f);
        cr_assert(flen > 4 && strcmp(f + flen - 4, " for") == 0, "fallback line: %s", head);
        snprintf(fallback_said[t][info->id], sizeof fallback_said[t][info->id], "%.*s",
                 (int)(flen - 4), f);
      }
    }
    line += len + (end ? 1 : 0);
  }

  for (unsigned t = 0; t < hip_target_count; t++) {
    const char *target = hip_targets[t];
    cr_expect_eq(main_lines[t], 1u, "describe has %u '%s:' lines", main_lines[t], target);
    for (int id = 0; id < METRALE_K_COUNT; id++) {
      const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)id);
      int has = object_has(info, target), required = info->requirement == METRALE_REQUIRED;
      unsigned expect = has ? PRESENT : required ? REQUIRED_ABSENT : FALLBACK;
      if (said[t][id] != expect) {
        cr_expect_fail("%s: the code object %s %s, describe %s", target, has ? "holds" : "lacks",
                       info->name,
                       said[t][id] & PRESENT     ? "lists it as present"
                       : said[t][id] & FALLBACK  ? "gives it a fallback"
                       : said[t][id]             ? "lists it as a missing required kernel"
                                                 : "does not mention it");
        continue;
      }
      if (expect == FALLBACK) {
        char manifest[256];
        snprintf(manifest, sizeof manifest, "%s", info->fallback);
        for (char *c = manifest; *c; c++)
          if (*c == ':') *c = ';';
        cr_expect_str_eq(fallback_said[t][id], manifest, "%s: the fallback of %s", target, info->name);
      }
    }
  }
}

Test(hip_code_objects, required_kernels_are_in_every_target) {
  for (unsigned t = 0; t < hip_target_count; t++) {
    for (int id = 0; id < METRALE_K_COUNT; id++) {
      const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)id);
      if (info->requirement != METRALE_REQUIRED) continue;
      cr_expect(object_has(info, hip_targets[t]), "required kernel %s.%s is not in the %s code object",
                info->module, info->name, hip_targets[t]);
    }
  }
}

#else

Test(hip_code_objects, hip_module) {
  cr_skip_test("the hip backend was not built (hipcc not found, or METRALE_HIP=OFF): no code objects to check");
}

#endif
