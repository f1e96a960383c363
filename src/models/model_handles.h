/* The handles of the public model API (vkgraph_model.h), shared by the files that implement it:
 * model.c (models, contexts, generation) and context_state.c (saving and loading a context). */
#ifndef VKG_MODELS_MODEL_HANDLES_H
#define VKG_MODELS_MODEL_HANDLES_H

#include "vkgraph_model.h"

#include "models/generation_config.h"
#include "models/model_run.h"
#include "models/sampling.h"

struct vkg_model {
    const vkg_decoder *dec;              /* the model, freed through dec->free       */
    vkg_tokenizer *tok;                  /* NULL when the folder has none            */
    vkg_device *dev;                     /* borrowed; NULL: facts and tokenizer only */
    vkg_weight_dtype dtype;
    int random_weights;
    char tokenizer_note[320];            /* why the folder's tokenizer is not read; "" */
    vkg_generation_config gen_config;    /* generation_config.json and the stop ids */
};

struct vkg_context {
    vkg_model *model;
    vkg_generator gen;
    int32_t *tokens;                     /* [n_ctx + 1]: the cache's, then a pending one */
    int n_tokens;                        /* >= gen.length; one more while a token is pending */
    int64_t generated;                   /* every token generated, for the marks' names  */
    vkg_sampler sampler;                 /* kept from one generate call to the next      */
    int sampler_ready;
    vkg_context_timings t;
};

#endif
