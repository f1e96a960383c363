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

/* Which loader reads dir: config.json's model_type as transformers' AutoConfig chooses (else
 * architectures[0]); GPT-2 when it names none (old GPT-2 configs) or when there is no readable
 * config.json (GPT-2's loader then says what is wrong).  *llama 1: the Llama family; 0: GPT-2; an
 * error for an architecture not supported, listing those that are. */
vkg_status vkg_model_choose_loader(const char *dir, int *llama, vkg_error *err);

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
