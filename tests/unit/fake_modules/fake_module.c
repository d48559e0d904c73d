/* Deliberately broken backend modules for the registry tests, one per define:
 *   FAKE_WRONG_VERSION  exports an entry whose api_version is not ours
 *   FAKE_NO_ENTRY       exports no metrale_backend_entry at all
 *   FAKE_GOOD           a module whose create() reports no device */
#include "metrale/gpu_backend.h"

#if defined(FAKE_WRONG_VERSION) || defined(FAKE_GOOD)
static metrale_status fake_create(const gpu_backend_options *options, gpu_backend **out) {
  (void)options;
  (void)out;
  return METRALE_ERROR(UNAVAILABLE, "fake backend: no device here");
}

static const gpu_backend_module fake = {
#ifdef FAKE_WRONG_VERSION
    .api_version = METRALE_BACKEND_API_VERSION + 41,
#else
    .api_version = METRALE_BACKEND_API_VERSION,
#endif
    .name = "fake",
    .score = 1,
    .create = fake_create,
    .describe = 0,
};

__attribute__((visibility("default"))) const gpu_backend_module *metrale_backend_entry(void) { return &fake; }
#else
__attribute__((visibility("default"))) int metrale_not_a_backend(void) { return 42; }
#endif
