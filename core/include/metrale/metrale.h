/* metrale: the Qwen3 SSM decoder layer on any GPU.  The umbrella header. */
#ifndef METRALE_METRALE_H
#define METRALE_METRALE_H

#include "metrale/bf16.h"
#include "metrale/device.h"
#include "metrale/gpu_backend.h"
#include "metrale/manifest.h"
#include "metrale/qwen3_ssm.h"
#include "metrale/state.h"
#include "metrale/status.h"
#include "metrale/weights.h"

#define METRALE_VERSION_STRING "0.1.0"

#endif
