/* The public writer of random GPT-2 checkpoints (vkgraph_model.h): its options as
 * gpt2_random.c's, which writes the files. */
#include "vkgraph_model.h"

#include "base/error.h"
#include "models/gpt2_random.h"
#include "models/gpt2_weights.h"

#include <string.h>

static void to_public(const vkg_gpt2_random_options *in, vkg_random_gpt2_options *o) {
    const vkg_gpt2_config *c = &in->config;
    memset(o, 0, sizeof *o);
    o->n_layer = c->n_layer;
    o->n_head = c->n_head;
    o->n_embd = c->n_embd;
    o->n_positions = c->n_positions;
    o->vocab_size = c->vocab_size;
    o->n_inner = c->n_inner;
    memcpy(o->activation, c->activation, sizeof o->activation);
    o->scale_attn_weights = c->scale_attn_weights;
    o->scale_attn_by_inverse_layer_idx = c->scale_attn_by_inverse_layer_idx;
    o->bos_token = c->bos_token_id;
    o->eos_token = c->eos_token_id;
    o->seed = in->seed;
    o->dtype = in->dtype == VKG_ST_F16 ? VKG_WEIGHTS_F16 : in->dtype == VKG_ST_BF16 ? VKG_WEIGHTS_BF16 : VKG_WEIGHTS_F32;
    o->prefix_transformer = in->prefix_transformer;
    o->untied_lm_head = in->untied_lm_head;
    o->attn_bias_buffers = in->attn_bias_buffers;
}

/* 0, or -1 for a dtype that is none of the three. */
static int to_private(const vkg_random_gpt2_options *o, vkg_gpt2_random_options *out) {
    vkg_gpt2_random_options_default(out); /* the fields the public options leave at their defaults */
    vkg_gpt2_config *c = &out->config;
    c->n_layer = o->n_layer;
    c->n_head = o->n_head;
    c->n_embd = o->n_embd;
    c->n_positions = o->n_positions;
    c->vocab_size = o->vocab_size;
    c->n_inner = o->n_inner;
    memcpy(c->activation, o->activation, sizeof c->activation);
    c->activation[sizeof c->activation - 1] = '\0';
    c->scale_attn_weights = o->scale_attn_weights;
    c->scale_attn_by_inverse_layer_idx = o->scale_attn_by_inverse_layer_idx;
    c->bos_token_id = o->bos_token;
    c->eos_token_id = o->eos_token;
    out->seed = o->seed;
    out->prefix_transformer = o->prefix_transformer;
    out->untied_lm_head = o->untied_lm_head;
    out->attn_bias_buffers = o->attn_bias_buffers;
    switch (o->dtype) {
    case VKG_WEIGHTS_AS_STORED:
    case VKG_WEIGHTS_F32: out->dtype = VKG_ST_F32; return 0;
    case VKG_WEIGHTS_F16: out->dtype = VKG_ST_F16; return 0;
    case VKG_WEIGHTS_BF16: out->dtype = VKG_ST_BF16; return 0;
    }
    return -1;
}

void vkg_random_gpt2_options_default(vkg_random_gpt2_options *o) {
    vkg_gpt2_random_options d;
    vkg_gpt2_random_options_default(&d);
    to_public(&d, o);
}

vkg_status vkg_random_gpt2_write(const char *dir, const vkg_random_gpt2_options *o, vkg_error *err) {
    if (!dir || !o) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_random_gpt2_write: NULL argument");
    vkg_gpt2_random_options p;
    if (to_private(o, &p))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "random GPT-2: dtype %d is none of f32, f16, bf16",
                             (int)o->dtype);
    return vkg_gpt2_write_random(dir, &p, err);
}

int64_t vkg_random_gpt2_parameter_count(const vkg_random_gpt2_options *o) {
    vkg_gpt2_random_options p;
    to_private(o, &p);
    return vkg_gpt2_weights_numel(&p.config, !o->untied_lm_head);
}

int vkg_gpt2_activation_supported(const char *name) { return vkg_gpt2_activation_kind(name) != VKG_GPT2_ACT_UNKNOWN; }

vkg_status vkg_random_gpt2_size(const char *name, vkg_random_gpt2_options *o, vkg_error *err) {
    if (!name || !o) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_random_gpt2_size: NULL argument");
    vkg_gpt2_random_options p;
    if (to_private(o, &p))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "random GPT-2: dtype %d is none of f32, f16, bf16",
                             (int)o->dtype);
    vkg_status st = vkg_gpt2_random_size(name, &p, err); /* the one table of sizes */
    if (st == VKG_OK) to_public(&p, o);
    return st;
}

const char *vkg_random_gpt2_size_names(void) { return vkg_gpt2_random_size_names(); }
