/*
 * A model's generation defaults as transformers reads them (GenerationConfig.from_pretrained):
 * generation_config.json beside config.json, and the ids that end a turn.  docs/API.md ("The
 * model's generation defaults") lists each key and what is done with it.
 */
#ifndef VKG_MODELS_GENERATION_CONFIG_H
#define VKG_MODELS_GENERATION_CONFIG_H

#include "vkgraph_model.h"
#include "models/config_keys.h"

#include <stdint.h>

typedef struct vkg_generation_config {
    int present;                /* the folder has generation_config.json                        */
    int32_t stop_ids[VKG_CONFIG_MAX_TOKEN_IDS]; /* the ids that end a turn (see _finish_stops)  */
    int n_stop;
    int32_t bos_token;          /* its bos_token_id; VKG_NO_TOKEN when it names none            */
    int do_sample;              /* 0 unless the file says true (transformers' default: greedy)  */
    double temperature, top_p, min_p, repetition_penalty;  /* 1, 1, 0, 1 when not given          */
    int top_k;                  /* 50 when not given, as GenerationConfig                      */
    int max_new_tokens;         /* 0: not given                                                 */
    int max_length;             /* 0: not given; tokens in all, the prompt's included           */
    char note[320];             /* keys that change the choice of tokens and are not applied    */
} vkg_generation_config;

/* Reads dir/generation_config.json (absent: the defaults, present 0) and, when it lists no
 * eos_token_id, config.json's eos_token_id (an id or a list).  Ids outside [0, n_vocab) are
 * dropped with a note.  A value transformers would refuse (a negative temperature, top_p
 * outside (0, 1], ...) is VKG_ERR_FORMAT naming the file and the key. */
vkg_status vkg_generation_config_read(const char *dir, int n_vocab, vkg_generation_config *gc, vkg_error *err);

/* When neither file listed an eos id: the model's eos (model_eos, from its config's defaults),
 * else the tokenizer's (tok_eos); either may be VKG_NO_TOKEN. */
void vkg_generation_config_finish_stops(vkg_generation_config *gc, int32_t model_eos, int32_t tok_eos);

/* The generate options of these defaults (vkg_model_generate_defaults). */
void vkg_generation_config_options(const vkg_generation_config *gc, vkg_generate_options *o);

#endif
