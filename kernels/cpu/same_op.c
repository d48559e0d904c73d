/* Kernels that compute exactly another kernel's op under another GPU launch shape
 * (kernels.def METRALE_KERNEL_SAME_OP): the cpu backend has no launch shapes, so each is
 * served by the other kernel's code.  One thunk per row, made from the manifest. */
#include "cpu_kernels.h"

#define METRALE_KERNEL(id, module, block, sig, req, fallback, contract)
#define METRALE_KERNEL_SAME_OP(id, as) \
  metrale_status cpu_k_##id(const gpu_arg *args) { return cpu_k_##as(args); }
#include "metrale/kernels.def"
#undef METRALE_KERNEL_SAME_OP
#undef METRALE_KERNEL
