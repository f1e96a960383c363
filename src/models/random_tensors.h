/*
 * The tensors of a random checkpoint, drawn and written as Hugging Face lays a checkpoint out:
 * one model.safetensors, or N shards model-0000k-of-0000N.safetensors with the index
 * model.safetensors.index.json ({"metadata": {"total_size": bytes}, "weight_map": {name: shard}})
 * that save_pretrained writes.  Every model's random writer (gpt2_random.c, llama_random.c) uses
 * it; the values come from vkg_rng seeded once, in the order the tensors are added, so the same
 * options give the same files on every machine (however many threads draw them).
 */
#ifndef VKG_MODELS_RANDOM_TENSORS_H
#define VKG_MODELS_RANDOM_TENSORS_H

#include "io/safetensors.h"
#include "vkgraph.h"

typedef struct vkg_random_tensors {
    vkg_st_write *items;        /* names and data owned until vkg_random_tensors_free */
    int n, cap;
    vkg_st_dtype dtype;         /* F32, F16 or BF16                                   */
    vkg_rng rng;
    struct vkg_threadpool *pool; /* draws the blocks of a normal fill; NULL: this thread   */
} vkg_random_tensors;

typedef enum vkg_fill_kind {
    VKG_FILL_NORMAL,   /* mean + N(0, std)                                             */
    VKG_FILL_TRIL,     /* the lower triangle of ones of the last two dimensions        */
    VKG_FILL_CONSTANT  /* mean everywhere                                              */
} vkg_fill_kind;

void vkg_random_tensors_init(vkg_random_tensors *s, vkg_st_dtype dtype, uint64_t seed);
void vkg_random_tensors_free(vkg_random_tensors *s);
/* Adds tensor `name` of shape [ndim], filled as kind says, stored in s->dtype. */
vkg_status vkg_random_tensors_add(vkg_random_tensors *s, const char *name, int ndim, const int64_t *shape,
                                  vkg_fill_kind kind, float mean, float std, vkg_error *err);
/* Writes them into dir: shards <= 1 gives model.safetensors, else that many shards (at most one
 * per tensor) of about equal size, in the order added, and the index. */
vkg_status vkg_random_tensors_write(const vkg_random_tensors *s, const char *dir, int shards, vkg_error *err);

/* mkdir -p: creates dir and any missing parents. */
vkg_status vkg_make_dirs(const char *dir, vkg_error *err);

#endif
