/* config.json's keys read with messages that name them (see config_keys.h). */
#include "models/config_keys.h"

#include "base/error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const vkg_json *present(const vkg_json *obj, const char *key, int *found) {
    const vkg_json *v = vkg_json_get(obj, key);
    if (v && vkg_json_type_of(v) == VKG_JSON_NULL) v = NULL;
    if (found) *found = v != NULL;
    return v;
}

vkg_status vkg_config_number(const vkg_json *obj, const char *key, double *out, int *found, vkg_error *err) {
    const vkg_json *v = present(obj, key, found);
    if (!v) return VKG_OK;
    if (vkg_json_type_of(v) != VKG_JSON_NUMBER || !isfinite(vkg_json_number(v)))
        return vkg_error_set(err, VKG_ERR_FORMAT, "\"%s\" must be a finite number (it is a JSON %s)", key,
                             vkg_json_type_name(vkg_json_type_of(v)));
    *out = vkg_json_number(v);
    return VKG_OK;
}

vkg_status vkg_config_int(const vkg_json *obj, const char *key, int *out, int *found, vkg_error *err) {
    const vkg_json *v = present(obj, key, found);
    if (!v) return VKG_OK;
    double d = vkg_json_number(v);
    if (vkg_json_type_of(v) != VKG_JSON_NUMBER || d != floor(d) || d < -2147483648.0 || d > 2147483647.0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "\"%s\" must be an integer (it is a JSON %s%s)", key,
                             vkg_json_type_name(vkg_json_type_of(v)),
                             vkg_json_type_of(v) == VKG_JSON_NUMBER ? " that is not a whole 32-bit number" : "");
    *out = (int)d;
    return VKG_OK;
}

vkg_status vkg_config_bool(const vkg_json *obj, const char *key, int *out, vkg_error *err) {
    const vkg_json *v = present(obj, key, NULL);
    if (!v) return VKG_OK;
    if (vkg_json_type_of(v) != VKG_JSON_BOOL)
        return vkg_error_set(err, VKG_ERR_FORMAT, "\"%s\" must be true or false (it is a JSON %s)", key,
                             vkg_json_type_name(vkg_json_type_of(v)));
    *out = vkg_json_bool(v);
    return VKG_OK;
}

vkg_status vkg_config_string(const vkg_json *obj, const char *key, char *buf, size_t size, int *found,
                             vkg_error *err) {
    const vkg_json *v = present(obj, key, found);
    if (!v) return VKG_OK;
    size_t len;
    const char *s = vkg_json_string(v, &len);
    if (!s)
        return vkg_error_set(err, VKG_ERR_FORMAT, "\"%s\" must be a string (it is a JSON %s)", key,
                             vkg_json_type_name(vkg_json_type_of(v)));
    if (len >= size || strlen(s) != len)
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "\"%s\" \"%.40s\" is not a known value", key, s);
    memcpy(buf, s, len + 1);
    return VKG_OK;
}

vkg_status vkg_config_token_list(const vkg_json *obj, const char *key, int n_vocab, int32_t *out, int cap, int *n,
                                 int *found, char *note, size_t note_size, vkg_error *err) {
    const vkg_json *v = vkg_json_get(obj, key);
    *n = 0;
    if (found) *found = v != NULL;
    if (!v || vkg_json_type_of(v) == VKG_JSON_NULL) return VKG_OK;
    const int list = vkg_json_type_of(v) == VKG_JSON_ARRAY;
    const size_t count = list ? vkg_json_length(v) : 1;
    if (count > (size_t)cap)
        return vkg_error_set(err, VKG_ERR_FORMAT, "\"%s\" lists %zu ids; at most %d are read", key, count, cap);
    for (size_t i = 0; i < count; i++) {
        const vkg_json *e = list ? vkg_json_at(v, i) : v;
        const double d = vkg_json_number(e);
        if (vkg_json_type_of(e) != VKG_JSON_NUMBER || d != floor(d) || d < 0 || d > 2147483647.0)
            return vkg_error_set(err, VKG_ERR_FORMAT, "\"%s\" must be a token id, a list of them, or null", key);
        if (d >= n_vocab) {
            const size_t used = strlen(note);
            if (used < note_size)
                snprintf(note + used, note_size - used, "%s%s %.0f lies outside the vocabulary [0, %d)",
                         used ? "; " : "", key, d, n_vocab);
            continue;
        }
        out[(*n)++] = (int32_t)d;
    }
    return VKG_OK;
}
