/* config.json's keys read with messages that name them (see config_keys.h). */
#include "models/config_keys.h"

#include "base/error.h"

#include <math.h>
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
