/* The push-constant layout of one kernel, as generated into vk_push_table.h by
 * tools/gen/vk_push_constants.c (the only place the layout rule lives). */
#ifndef VK_PUSH_LAYOUT_H
#define VK_PUSH_LAYOUT_H

#include <stdint.h>

#include "metrale/manifest.h"

#define VK_PUSH_MAX_ARGS METRALE_MAX_KERNEL_ARGS

typedef struct vk_push_layout {
  uint32_t size;  /* bytes, a multiple of 4, <= 128 */
  uint32_t block; /* the shader's local_size_x */
  uint32_t nargs;
  uint32_t offsets[VK_PUSH_MAX_ARGS];
} vk_push_layout;

#endif
