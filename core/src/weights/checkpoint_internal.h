/* The checkpoint object, shared by checkpoint.c and checkpoint_upload.c. */
#ifndef METRALE_CHECKPOINT_INTERNAL_H
#define METRALE_CHECKPOINT_INTERNAL_H

#include "weights_internal.h"

typedef struct ckpt_entry {
  char *name;
  uint32_t shard;
} ckpt_entry;

struct metrale_checkpoint {
  char *dir;
  metrale_safetensors **shards;
  char **shard_names; /* as written in the index */
  uint32_t nshards;
  ckpt_entry *entries; /* sorted by name */
  size_t nentries;
  void *bounce; /* conversion buffer, allocated on first use; uploads are not reentrant */
};

/* Finds a tensor and the file that holds it (out_file may be NULL). */
metrale_status metrale_checkpoint_lookup(metrale_checkpoint *c, const char *name,
                                         metrale_safetensors **out_file,
                                         const metrale_tensor_info **out_info);

#endif
