/* tokenizer_config.json's keys (see tokenizer_config.h). */
#include "io/tokenizer_config.h"

#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

vkg_status vkg_tokenizer_config_token(const vkg_json *cfg, const char *key, const char *path, const char **out,
                                      vkg_error *err) {
    const vkg_json *v = vkg_json_get(cfg, key);
    *out = NULL;
    if (!v || vkg_json_type_of(v) == VKG_JSON_NULL) return VKG_OK;
    if (vkg_json_type_of(v) == VKG_JSON_OBJECT) v = vkg_json_get(v, "content");
    size_t len;
    const char *s = vkg_json_string(v, &len);
    if (!s || strlen(s) != len)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: %s is neither a string nor an object with a string \"content\"",
                             path, key);
    *out = s;
    return VKG_OK;
}

vkg_status vkg_tokenizer_config_read(const char *dir, vkg_json **out, char **path, vkg_error *err) {
    *out = NULL;
    *path = malloc(strlen(dir) + sizeof "/tokenizer_config.json");
    if (!*path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    sprintf(*path, "%s/tokenizer_config.json", dir);
    struct stat sb;
    if (stat(*path, &sb) != 0) return VKG_OK;
    vkg_status st = vkg_json_parse_file(*path, out, err);
    if (st == VKG_OK && vkg_json_type_of(*out) != VKG_JSON_OBJECT) {
        vkg_json_free(*out);
        *out = NULL;
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: expected a JSON object", *path);
    }
    return st;
}

int vkg_tokenizer_config_honours_add_tokens(const vkg_json *cfg) {
    static const char *const classes[] = {"LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer",
                                          "CodeLlamaTokenizerFast"};
    const char *c = vkg_json_string(vkg_json_get(cfg, "tokenizer_class"), NULL);
    for (size_t i = 0; c && i < sizeof classes / sizeof *classes; i++)
        if (strcmp(c, classes[i]) == 0) return 1;
    return 0;
}
