/*
 * Rotary position embeddings' tables, computed on the host in float64 exactly as transformers'
 * rope initialisation functions compute inv_freq (ROPE_INIT_FUNCTIONS: "default", "linear",
 * "llama3"), so the graph only looks rows up.
 *
 * Shapes: D the rotated head size (head_dim), P positions.  inv_freq[i] = theta^(-2i / D) for
 * i < D/2, then scaled: linear divides every frequency by factor; llama3 divides the low
 * frequencies (wavelength above original / low_freq_factor) by factor, keeps the high ones
 * (wavelength below original / high_freq_factor) and blends between.  The table is
 * [2, P, D/2]: cos(p * inv_freq[i]), then sin(p * inv_freq[i]), rounded once to f32.  In the
 * rotate_half layout transformers uses, channel j and j + D/2 of a head share frequency i = j.
 */
#ifndef VKG_MODELS_ROPE_H
#define VKG_MODELS_ROPE_H

#include "models/llama_config.h"

/* inv_freq[0 .. D/2) for r. */
void vkg_rope_inv_freq(const vkg_rope_config *r, int head_dim, double *inv_freq);
/* The table [2, P, D/2] as above into a new f32 array (free it); NULL when out of memory. */
float *vkg_rope_table(const vkg_rope_config *r, int head_dim, int positions);

#endif
