/* The one status type: codes, messages, annotation, ownership. */
#include <criterion/criterion.h>
#include <string.h>

#include "metrale/status.h"

Test(status, ok_is_null_and_reads_as_ok) {
  cr_expect_null(METRALE_OK);
  cr_expect_eq(metrale_status_code(METRALE_OK), METRALE_CODE_OK);
  cr_expect_str_eq(metrale_status_message(METRALE_OK), "OK");
  metrale_status_free(METRALE_OK); /* harmless */
}

Test(status, error_carries_code_message_and_place) {
  metrale_status s = METRALE_ERROR(DATA_LOSS, "tensor %s is %d bytes short", "w", 12);
  cr_assert_not_null(s);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_DATA_LOSS);
  cr_expect_str_eq(metrale_status_message(s), "tensor w is 12 bytes short");
  cr_expect(strncmp(metrale_status_where(s), "test_status.c:", 14) == 0, "where: %s", metrale_status_where(s));
  cr_expect_str_eq(metrale_code_name(metrale_status_code(s)), "DATA_LOSS");
  metrale_status_free(s);
}

Test(status, annotate_prepends_context) {
  metrale_status s = METRALE_ERROR(NOT_FOUND, "no tensor x");
  s = metrale_status_annotate(s, "loading layer %d", 3);
  cr_expect_str_eq(metrale_status_message(s), "loading layer 3: no tensor x");
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_NOT_FOUND);
  cr_expect_null(metrale_status_annotate(METRALE_OK, "ignored"));
  metrale_status_free(s);
}

static metrale_status fails(void) { return METRALE_ERROR(IO, "disk"); }
static metrale_status passes(void) { return METRALE_OK; }
static metrale_status chain(int *reached) {
  METRALE_RETURN_IF_ERROR(passes());
  *reached = 1;
  METRALE_RETURN_IF_ERROR(fails());
  *reached = 2;
  return METRALE_OK;
}

Test(status, return_if_error_stops_at_the_first_error) {
  int reached = 0;
  metrale_status s = chain(&reached);
  cr_expect_eq(reached, 1);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_IO);
}

Test(status, an_ok_code_is_never_made_into_an_error_object_that_reads_ok) {
  metrale_status s = metrale_status_make(METRALE_CODE_OK, __FILE__, __LINE__, "oops");
  cr_expect_neq(metrale_status_code(s), METRALE_CODE_OK);
  metrale_status_free(s);
}
