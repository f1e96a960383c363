/*
 * A Hugging Face checkpoint's tensors as downloaded: dir/model.safetensors, or the shards that
 * dir/model.safetensors.index.json lists (model-00001-of-00002.safetensors, ...), seen as one set
 * of named tensors.  Every model's loader reads through it (weights_read.h), so a model needs
 * only its weight table.
 *
 * The index is trusted no further than a safetensors header: its "weight_map" must be an object
 * of tensor name -> shard file name; a shard name must be a plain file name in dir (no '/', not
 * "." or "..", no leading '.', at most 255 bytes), every shard must exist and open, each tensor a
 * shard holds must be listed in the index as held by that shard (so no tensor is in two shards
 * and none is unlisted), and each tensor the index lists must be in the shard it names.  At most
 * VKG_CHECKPOINT_MAX_SHARDS shards.  The shards stay open (pread, never mapped) until closed;
 * vkg_checkpoint_check_unchanged says whether any of them changed since it was opened.
 */
#ifndef VKG_MODELS_CHECKPOINT_H
#define VKG_MODELS_CHECKPOINT_H

#include "io/safetensors.h"
#include "vkgraph.h"

#define VKG_CHECKPOINT_MAX_SHARDS 4096
#define VKG_CHECKPOINT_INDEX "model.safetensors.index.json"

typedef struct vkg_checkpoint vkg_checkpoint;

/* Opens dir's weights: model.safetensors when dir has it (as transformers prefers), else the
 * index and its shards. */
vkg_status vkg_checkpoint_open(const char *dir, vkg_checkpoint **out, vkg_error *err);
void vkg_checkpoint_close(vkg_checkpoint *c); /* NULL is fine */

/* The tensor named `name` and the file holding it (*file may be NULL); NULL when absent. */
const vkg_st_tensor *vkg_checkpoint_find(const vkg_checkpoint *c, const char *name, const vkg_safetensors **file);
/* "dir/model.safetensors" or "dir/model.safetensors.index.json": what messages name. */
const char *vkg_checkpoint_path(const vkg_checkpoint *c);
int vkg_checkpoint_shards(const vkg_checkpoint *c);
/* Shard i (0 <= i < vkg_checkpoint_shards), to walk every tensor the checkpoint holds. */
const vkg_safetensors *vkg_checkpoint_shard(const vkg_checkpoint *c, int i);
/* VKG_ERR_IO naming the file unless every file is as it was at open. */
vkg_status vkg_checkpoint_check_unchanged(const vkg_checkpoint *c, vkg_error *err);

/* Checks that dir is a folder; the message says a model folder holds config.json and weights. */
vkg_status vkg_checkpoint_check_folder(const char *dir, vkg_error *err);
/* dir/name in a new string (free it), or NULL when out of memory. */
char *vkg_path_join(const char *dir, const char *name);

#endif
