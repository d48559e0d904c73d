#include "metrale/addr_set.h"

#include <stdlib.h>

static size_t slot_of(uint64_t p, size_t cap) {
  p ^= p >> 33; /* device pointers are aligned: mix the high bits down */
  p *= 0xff51afd7ed558ccdull;
  p ^= p >> 33;
  return (size_t)p & (cap - 1);
}

static void put(metrale_addr_set *set, uint64_t p) {
  for (size_t i = slot_of(p, set->cap);; i = (i + 1) & (set->cap - 1)) {
    if (set->slots[i] == 0) {
      set->slots[i] = p;
      set->used++;
      return;
    }
    if (set->slots[i] == 1) { /* reuse a removed slot */
      set->slots[i] = p;
      return;
    }
  }
}

metrale_status metrale_addr_set_insert(metrale_addr_set *set, uint64_t p) {
  if (p <= 1) return METRALE_ERROR(INVALID_ARGUMENT, "address %llu cannot be tracked", (unsigned long long)p);
  if (2 * (set->used + 1) > set->cap) { /* keep at least half the slots empty */
    size_t cap = set->cap ? 2 * set->cap : 64;
    uint64_t *grown = calloc(cap, sizeof *grown);
    if (!grown) return METRALE_ERROR(OUT_OF_MEMORY, "allocation table of %zu entries", cap);
    uint64_t *old = set->slots;
    size_t old_cap = set->cap;
    set->slots = grown;
    set->cap = cap;
    set->used = 0;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i] > 1) put(set, old[i]);
    free(old);
  }
  put(set, p);
  return METRALE_OK;
}

int metrale_addr_set_remove(metrale_addr_set *set, uint64_t p) {
  if (!set->cap || p <= 1) return 0;
  for (size_t i = slot_of(p, set->cap);; i = (i + 1) & (set->cap - 1)) {
    if (set->slots[i] == 0) return 0;
    if (set->slots[i] == p) {
      set->slots[i] = 1;
      return 1;
    }
  }
}

void metrale_addr_set_drain(metrale_addr_set *set, void (*fn)(void *ctx, uint64_t addr), void *ctx) {
  for (size_t i = 0; i < set->cap; i++)
    if (set->slots[i] > 1) fn(ctx, set->slots[i]);
  free(set->slots);
  set->slots = NULL;
  set->cap = set->used = 0;
}
