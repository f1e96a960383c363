/* Rotary position embeddings from a model's config facts: the inverse frequencies as
 * transformers' modeling_rope_utils.py computes them per rope_type, and the cos/sin table that
 * vkg_rope reads.
 *
 * Everything is computed in double, the table rounded once to f32 at the end: the angle
 * pos * inv_freq formed in f32 would be off by ~1e-3 rad at position 32768.  (transformers
 * forms inv_freq and the angles in f32; its results at long positions differ from these, and
 * from a float64 reference, by that rounding.)
 *
 * Types: "default" (rope_theta alone), "linear" (inv_freq / factor), "llama3" (Llama 3.1's
 * smooth interpolation between the original and the scaled frequencies), "yarn" (YaRN, as Qwen
 * models enable it for long contexts: the high frequencies kept, the low ones divided by factor,
 * a linear ramp between, cos and sin scaled by the attention factor; transformers 5's
 * _compute_yarn_parameters), "dynamic" (dynamic NTK: its base grows only once a sequence passes
 * max_position_embeddings, which no KV cache here does, so it rotates as "default").  "longrope"
 * and others are refused by name. */
#ifndef VKG_MODELS_ROPE_H
#define VKG_MODELS_ROPE_H

#include "base/error.h"

#include <stdint.h>

/* The rope types, the one list of them: X(ENUM, name) per type, VKG_ROPE_<ENUM> named "name" as
 * rope_scaling's rope_type names it.  The enum, the names, the parser and the conformance cases
 * (one per type) are generated from it. */
#define VKG_ROPE_TYPES(X) X(DEFAULT, default) X(LINEAR, linear) X(LLAMA3, llama3) X(YARN, yarn) X(DYNAMIC, dynamic)

#define VKG_ROPE_TYPE_ENUM(ENUM, name) VKG_ROPE_##ENUM,
typedef enum vkg_rope_type { VKG_ROPE_TYPES(VKG_ROPE_TYPE_ENUM) VKG_ROPE_TYPE_COUNT } vkg_rope_type;
#undef VKG_ROPE_TYPE_ENUM

/* "default", "linear", "llama3", "yarn", "dynamic"; "?" for a value outside the enum. */
const char *vkg_rope_type_name(vkg_rope_type type);

typedef struct vkg_rope_config {
    vkg_rope_type type;
    double theta;                 /* rope_theta (base)                                          */
    int64_t dim;                  /* the rotated width: head_dim (times partial_rotary_factor)  */
    double factor;                /* rope_scaling.factor: linear, llama3, yarn, dynamic         */
    double low_freq_factor;       /* llama3 */
    double high_freq_factor;      /* llama3 */
    double original_max_position_embeddings; /* llama3, yarn (the model's context where absent)  */
    /* yarn; 0 stands for a key absent or null, as transformers reads them: */
    double beta_fast, beta_slow;  /* rotations bounding the ramp: 32, 1                         */
    double attention_factor;      /* cos/sin scale: 0.1 ln(factor) + 1, or from mscale and
                                     mscale_all_dim where both are given                        */
    double mscale, mscale_all_dim;
    int no_truncate;              /* "truncate": false, the ramp's bounds not rounded outward   */
} vkg_rope_config;

/* The type named by rope_scaling's "rope_type" (or the older "type"); NULL is "default".  Other
 * names give VKG_ERR_UNSUPPORTED naming the type. */
vkg_status vkg_rope_type_parse(const char *name, vkg_rope_type *type, vkg_error *err);

/* inv_freq[i] for i < dim / 2, and the factor the cos and sin are multiplied by (transformers'
 * attention_factor: 1 but for yarn).  Checks the facts (dim even and positive, theta >
 * 1, factors as each type needs). */
vkg_status vkg_rope_inv_freq(const vkg_rope_config *c, double *inv_freq, double *attention_factor, vkg_error *err);

/* table [positions, 2 * half]: row p holds attention_factor * cos(p inv_freq[i]) at i and
 * attention_factor * sin(p inv_freq[i]) at half + i, each computed in double and rounded once. */
void vkg_rope_fill_table(const double *inv_freq, int64_t half, double attention_factor, int64_t positions,
                         float *table);

#endif
