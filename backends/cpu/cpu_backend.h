/* The CPU reference backend: built into libmetrale, always available. */
#ifndef METRALE_CPU_BACKEND_H
#define METRALE_CPU_BACKEND_H

#include "metrale/gpu_backend.h"

const gpu_backend_module *cpu_backend_module(void);

#endif
