/* The address set backends use to track their allocations. */
#include <criterion/criterion.h>

#include "metrale/addr_set.h"

static void count_one(void *ctx, uint64_t addr) {
  uint64_t *acc = ctx;
  acc[0]++;
  acc[1] ^= addr;
}

Test(addr_set, insert_remove_grow_and_drain) {
  metrale_addr_set set = {0};
  uint64_t x = 0;
  for (uint64_t i = 1; i <= 1000; i++) { /* 256-aligned, like device pointers: grows past 64 */
    cr_assert_eq(metrale_addr_set_insert(&set, i * 256), METRALE_OK);
    x ^= i * 256;
  }
  for (uint64_t i = 1; i <= 1000; i += 2) {
    cr_expect_eq(metrale_addr_set_remove(&set, i * 256), 1, "%llu was inserted", (unsigned long long)i);
    cr_expect_eq(metrale_addr_set_remove(&set, i * 256), 0, "a second remove must miss");
    x ^= i * 256;
  }
  cr_expect_eq(metrale_addr_set_remove(&set, 12345), 0, "a foreign address is not in the set");
  cr_expect_eq(metrale_addr_set_insert(&set, 256), METRALE_OK); /* reuses a removed slot */
  x ^= 256;
  uint64_t acc[2] = {0, 0};
  metrale_addr_set_drain(&set, count_one, acc);
  cr_expect_eq(acc[0], 501, "drain visits every address left, once");
  cr_expect_eq(acc[1], x);
  cr_expect_null(set.slots);
  cr_expect_eq(metrale_addr_set_remove(&set, 512), 0, "a drained set is empty");
}

Test(addr_set, reserved_values_are_refused) {
  metrale_addr_set set = {0};
  metrale_status s = metrale_addr_set_insert(&set, 0);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_INVALID_ARGUMENT);
  s = metrale_addr_set_insert(&set, 1);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_INVALID_ARGUMENT);
  cr_expect_eq(metrale_addr_set_remove(&set, 0), 0);
}
