/* The public writer of random Llama-family checkpoints (vkgraph_model.h) over llama_random.c. */
#include "vkgraph_model.h"

#include "base/error.h"
#include "models/llama_random.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void vkg_random_model_options_default(vkg_random_model_options *o) {
    memset(o, 0, sizeof *o);
    o->shape = "llama-tiny";
    o->tied = -1;
    o->dtype = VKG_WEIGHTS_F32;
    o->seed = 1;
    o->eos_token = -1;
}

const char *vkg_random_model_shapes(void) { return vkg_llama_random_shape_names(); }

/* The config's rope scaling as vkg_random_model_options.rope_scaling spells it; the config writer
 * then checks the numbers as transformers would (vkg_rope_inv_freq). */
static vkg_status set_rope_scaling(vkg_llama_config *c, const char *spec, vkg_error *err) {
    const double theta = c->rope.theta;
    memset(&c->rope, 0, sizeof c->rope);
    c->rope.theta = theta, c->rope.type = VKG_ROPE_DEFAULT;
    if (strcmp(spec, "none") == 0) return VKG_OK;
    const char *colon = strchr(spec, ':');
    char name[16];
    if (!colon || (size_t)(colon - spec) >= sizeof name)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope scaling '%s': write TYPE:FACTOR[:ORIGINAL] (yarn:4, "
                             "llama3:32:8192, ...) or none", spec);
    memcpy(name, spec, (size_t)(colon - spec));
    name[colon - spec] = '\0';
    vkg_status st = vkg_rope_type_parse(name, &c->rope.type, err);
    if (st != VKG_OK) return st;
    if (c->rope.type == VKG_ROPE_DEFAULT)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope scaling '%s': for no scaling write none", spec);
    char *end;
    c->rope.factor = strtod(colon + 1, &end);
    double original = 0;
    if (*end == ':') {
        const char *o = end + 1;
        original = strtod(o, &end);
        if (end == o || !(original >= 1) || original != floor(original) || original > 1e9)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope scaling '%s': ORIGINAL must be a whole number "
                                 "of positions", spec);
        if (c->rope.type != VKG_ROPE_LLAMA3 && c->rope.type != VKG_ROPE_YARN)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope scaling '%s': only llama3 and yarn take ORIGINAL",
                                 spec);
    }
    if (*end != '\0' || !(c->rope.factor > 0) || !isfinite(c->rope.factor))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope scaling '%s': FACTOR must be a positive number", spec);
    if (c->rope.type == VKG_ROPE_LLAMA3) {
        c->rope.low_freq_factor = 1, c->rope.high_freq_factor = 4;
        c->rope.original_max_position_embeddings = original ? original : 8192;
    }
    if (c->rope.type == VKG_ROPE_YARN) c->rope.original_max_position_embeddings = original ? original : c->n_positions;
    return VKG_OK;
}

vkg_status vkg_random_model_write(const char *dir, const vkg_random_model_options *o, vkg_error *err) {
    if (!dir || !o || !o->shape) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_random_model_write: NULL argument");
    vkg_llama_random_options r;
    memset(&r, 0, sizeof r);
    vkg_status st = vkg_llama_random_shape(o->shape, &r, err);
    if (st != VKG_OK) return st;
    vkg_llama_config *c = &r.config;
    if (o->arch && strcmp(o->arch, vkg_llama_arch_name(c->arch)) != 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "shape %s is a %s model, not %s", o->shape,
                             vkg_llama_arch_name(c->arch), o->arch);
    if (o->n_layer < 0 || o->n_layer > VKG_LLAMA_MAX_LAYERS || o->n_positions < 0 || o->vocab_size < 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "layers %d / positions %d / vocabulary %d out of range",
                             o->n_layer, o->n_positions, o->vocab_size);
    if (o->vocab_size) {
        c->vocab_size = o->vocab_size;
        if (c->bos_token_id >= c->vocab_size) c->bos_token_id = VKG_NO_TOKEN;
        if (c->eos_token_id >= c->vocab_size) c->eos_token_id = VKG_NO_TOKEN;
    }
    if (o->n_layer) {
        for (int l = c->n_layer; l < o->n_layer; l++) c->windowed[l] = c->windowed[0];
        c->n_layer = o->n_layer;
    }
    if (o->n_positions) c->n_positions = o->n_positions;
    if (o->tied >= 0) c->tie_word_embeddings = o->tied != 0;
    if (o->eos_token >= c->vocab_size)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "eos token %d is outside the vocabulary of %d tokens",
                             o->eos_token, c->vocab_size);
    if (o->eos_token >= 0) c->eos_token_id = o->eos_token;
    if (o->rope_scaling && (st = set_rope_scaling(c, o->rope_scaling, err)) != VKG_OK) return st;
    r.shards = o->shards;
    r.seed = o->seed;
    switch (o->dtype) {
    case VKG_WEIGHTS_AS_STORED:
    case VKG_WEIGHTS_F32: r.dtype = VKG_ST_F32; break;
    case VKG_WEIGHTS_F16: r.dtype = VKG_ST_F16; break;
    case VKG_WEIGHTS_BF16: r.dtype = VKG_ST_BF16; break;
    default: return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "random weights: dtype %d is none of f32, f16, bf16",
                                  (int)o->dtype);
    }
    return vkg_llama_write_random(dir, &r, err);
}
