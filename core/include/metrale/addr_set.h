/* A set of device addresses, for backends that must know which pointers they handed out
 * (so that destroy frees what is left and a foreign pointer never reaches the driver's
 * free).  Open addressing; not thread-safe: the caller holds its own lock. */
#ifndef METRALE_ADDR_SET_H
#define METRALE_ADDR_SET_H

#include <stddef.h>
#include <stdint.h>

#include "metrale/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct metrale_addr_set {
  uint64_t *slots; /* 0: empty, 1: removed, else an address */
  size_t cap, used; /* used counts removed slots too */
} metrale_addr_set;

/* Adds a (non-zero, not 1) address; OUT_OF_MEMORY leaves the set as it was. */
metrale_status metrale_addr_set_insert(metrale_addr_set *set, uint64_t addr);
/* Removes an address; 1 if it was there, 0 if not. */
int metrale_addr_set_remove(metrale_addr_set *set, uint64_t addr);
/* Calls fn for every address still in the set, then empties it and frees its memory. */
void metrale_addr_set_drain(metrale_addr_set *set, void (*fn)(void *ctx, uint64_t addr), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
