/*
 * Reading config.json's keys with the messages every model's config reader gives: each helper
 * leaves *out (the default) as it is when the key is absent or null, and names the key and what
 * it holds when the type is wrong.
 */
#ifndef VKG_MODELS_CONFIG_KEYS_H
#define VKG_MODELS_CONFIG_KEYS_H

#include "base/json.h"
#include "vkgraph.h"

#include <stdint.h>

/* An integer in [INT_MIN, INT_MAX]; *found (may be NULL) says whether it was there. */
vkg_status vkg_config_int(const vkg_json *obj, const char *key, int *out, int *found, vkg_error *err);
vkg_status vkg_config_number(const vkg_json *obj, const char *key, double *out, int *found, vkg_error *err);
vkg_status vkg_config_bool(const vkg_json *obj, const char *key, int *out, vkg_error *err);
/* A string into buf (size bytes, NUL-terminated; longer is an error). */
vkg_status vkg_config_string(const vkg_json *obj, const char *key, char *buf, size_t size, int *found,
                             vkg_error *err);

/* A token id, a list of them, or null (none), as config.json and generation_config.json write
 * bos_token_id / eos_token_id.  Up to cap ids into out (*n gets the count; more than cap is an
 * error); an id outside [0, n_vocab) is dropped and named in note (note_size bytes, appended
 * to after "; ").  *found says whether the key was there, null included. */
#define VKG_CONFIG_MAX_TOKEN_IDS 32

vkg_status vkg_config_token_list(const vkg_json *obj, const char *key, int n_vocab, int32_t *out, int cap, int *n,
                                 int *found, char *note, size_t note_size, vkg_error *err);

#endif
