/*
 * Reading a model's weights from a checkpoint (one safetensors file or its shards, checkpoint.h),
 * for every model's loader: the model lists
 * the tensors it needs (from its weight table), and these find each one, check its shape and
 * dtype, and read them all into one page-aligned block the model owns, each at a 256-byte
 * aligned offset (the largest storage-buffer offset alignment devices ask for), so that the block
 * can be handed to a device that imports host memory.  Matrices are held in the dtype the model
 * asks for (f32, f16 or bf16: converted at the read), vectors in f32; a matrix may be held
 * transposed (for a device that reads [N, K] faster, vkg_device_prefers_transposed_weights).  A NaN or Inf is refused,
 * naming the first bad element, also one that converting to f16 made (a value beyond +-65504);
 * so is a file that changed while it was read.
 */
#ifndef VKG_MODELS_WEIGHTS_READ_H
#define VKG_MODELS_WEIGHTS_READ_H

#include "io/safetensors.h"
#include "models/checkpoint.h"
#include "vkgraph.h"

typedef struct vkg_weight_want {
    char name[64];                   /* without the file's prefix                             */
    int ndim;                        /* 2: a matrix (held in the matrices' dtype); 1: a vector */
    int64_t shape[2];
    int id, layer;                   /* the model's own: which weight, which layer            */
    int transpose;                   /* a matrix held transposed, [shape[1], shape[0]]          */
    int joined;                      /* the next tensor follows this one at once, no padding
                                        between (parts of one constant: a fused projection)      */
    const vkg_st_tensor *found;      /* set by vkg_weights_match                              */
    const vkg_safetensors *file;     /* the file (shard) holding it, set by vkg_weights_match */
    void *data;                      /* set by vkg_weights_read: where it lies in the block   */
} vkg_weight_want;

/* What config.json says, for the messages of vkg_weights_match: `missing` follows "config.json
 * says " when a tensor is missing or one is not the model's (the file may be of another model or
 * configuration), `shapes` follows "from config.json: " when a shape differs.  `not_read`: the
 * endings of the names of tensors a checkpoint may hold that the model does not read (buffers
 * transformers computes itself, a tied head's copy), NULL-terminated; NULL for none. */
typedef struct vkg_weights_note {
    const char *missing, *shapes;
    const char *const *not_read;
} vkg_weights_note;

/* Finds each of w[0..n) in ck as prefix + name, else as name alone, and checks its shape and
 * that its dtype converts (F32, F16, BF16); then that ck holds no other tensor but those that end
 * as note->not_read lists (a weight the model would not read means config.json describes another
 * model: biases it leaves out, a Qwen3's q_norm under a Llama config).  Errors (VKG_ERR_FORMAT,
 * VKG_ERR_UNSUPPORTED) name the file, the tensor and the shapes. */
vkg_status vkg_weights_match(const vkg_checkpoint *ck, const char *prefix, vkg_weight_want *w, int n,
                             const vkg_weights_note *note, vkg_error *err);

/* Called with the fraction of the bytes read so far (0 first, then after each tensor); returning
 * 0 stops the read with VKG_ERR_CANCELLED. */
typedef struct vkg_weights_progress {
    int (*fn)(void *user, float fraction);
    void *user;
} vkg_weights_progress;

/* Reads every matched tensor into one block (*block, *bytes: a whole number of pages, freed with
 * vkg_weights_free, also after an error), matrices in matrix_dtype, then checks that no file
 * changed meanwhile.  progress may be NULL. */
vkg_status vkg_weights_read(const vkg_checkpoint *ck, vkg_weight_want *w, int n, vkg_dtype matrix_dtype,
                            const vkg_weights_progress *progress, void **block, size_t *bytes, vkg_error *err);
void vkg_weights_free(void *block, size_t bytes);

/* The vkg_dtype of a file's dtype (F16, BF16; anything else F32). */
vkg_dtype vkg_weights_dtype_of_file(vkg_st_dtype d);

#endif
