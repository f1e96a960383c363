/* A checkpoint's tensors from one safetensors file or the shards of an index (see checkpoint.h). */
#include "models/checkpoint.h"

#include "base/error.h"
#include "base/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct vkg_checkpoint {
    char *path;                 /* the index, or the one file                             */
    int n;
    vkg_safetensors **files;    /* n                                                      */
};

char *vkg_path_join(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", dir, name);
    return p;
}

vkg_status vkg_checkpoint_check_folder(const char *dir, vkg_error *err) {
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return vkg_error_set(err, VKG_ERR_IO, "%s: %s (expected a model folder holding config.json and "
                             "model.safetensors)", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return vkg_error_set(err, VKG_ERR_IO, "%s is not a folder (expected a model folder holding config.json and "
                             "model.safetensors)", dir);
    return VKG_OK;
}

void vkg_checkpoint_close(vkg_checkpoint *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) vkg_safetensors_close(c->files[i]);
    free(c->files);
    free(c->path);
    free(c);
}

const char *vkg_checkpoint_path(const vkg_checkpoint *c) { return c->path; }
int vkg_checkpoint_shards(const vkg_checkpoint *c) { return c->n; }
const vkg_safetensors *vkg_checkpoint_shard(const vkg_checkpoint *c, int i) { return c->files[i]; }

const vkg_st_tensor *vkg_checkpoint_find(const vkg_checkpoint *c, const char *name, const vkg_safetensors **file) {
    for (int i = 0; c && i < c->n; i++) {
        const vkg_st_tensor *t = vkg_safetensors_find(c->files[i], name);
        if (t) {
            if (file) *file = c->files[i];
            return t;
        }
    }
    return NULL;
}

vkg_status vkg_checkpoint_check_unchanged(const vkg_checkpoint *c, vkg_error *err) {
    for (int i = 0; i < c->n; i++) {
        vkg_status st = vkg_safetensors_check_unchanged(c->files[i], err);
        if (st != VKG_OK) return st;
    }
    return VKG_OK;
}

/* A shard's name must stay inside the folder: one plain file name. */
static int plain_file_name(const char *s, size_t len) {
    return len > 0 && len <= 255 && strlen(s) == len && s[0] != '.' && !strchr(s, '/') && !strchr(s, '\\');
}

/* The shards of index `root` (already parsed) opened into c, then checked against the map. */
static vkg_status open_shards(vkg_checkpoint *c, const char *dir, const vkg_json *root, vkg_error *err) {
    const vkg_json *map = vkg_json_get(root, "weight_map");
    if (vkg_json_type_of(map) != VKG_JSON_OBJECT)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: \"weight_map\" must be an object of tensor name -> shard file "
                             "(it is %s)", c->path, map ? vkg_json_type_name(vkg_json_type_of(map)) : "missing");
    const size_t entries = vkg_json_length(map);
    if (entries == 0) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: \"weight_map\" lists no tensors", c->path);
    /* The distinct shard names, in the order of first mention. */
    const char **names = calloc(entries, sizeof *names);
    if (!names) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    int n_names = 0;
    vkg_status st = VKG_OK;
    for (size_t i = 0; i < entries && st == VKG_OK; i++) {
        size_t klen, len;
        const char *key = vkg_json_key_at(map, i, &klen);
        const char *s = vkg_json_string(vkg_json_at(map, i), &len);
        if (!s) {
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor \"%.*s\" maps to a JSON %s, not a shard file name",
                               c->path, (int)(klen > 80 ? 80 : klen), key,
                               vkg_json_type_name(vkg_json_type_of(vkg_json_at(map, i))));
            break;
        }
        if (!plain_file_name(s, len)) {
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: shard \"%.80s\" (of tensor \"%.*s\") is not a plain file name "
                               "in the model folder", c->path, s, (int)(klen > 80 ? 80 : klen), key);
            break;
        }
        int k = 0;
        while (k < n_names && strcmp(names[k], s) != 0) k++;
        if (k == n_names) {
            if (n_names == VKG_CHECKPOINT_MAX_SHARDS) {
                st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: more than %d shard files", c->path,
                                   VKG_CHECKPOINT_MAX_SHARDS);
                break;
            }
            names[n_names++] = s;
        }
    }
    if (st == VKG_OK) {
        c->files = calloc((size_t)n_names, sizeof *c->files);
        if (!c->files) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int k = 0; st == VKG_OK && k < n_names; k++) {
        char *p = vkg_path_join(dir, names[k]);
        struct stat sb;
        if (!p) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        else if (stat(p, &sb) != 0)
            st = vkg_error_set(err, VKG_ERR_IO, "%s: shard %s, which the index lists, is missing: %s", c->path,
                               names[k], strerror(errno));
        else st = vkg_safetensors_open(p, &c->files[k], err);
        if (st == VKG_OK) c->n++;
        free(p);
    }
    /* Each shard's tensors must be those the index gives it, and no others: then no tensor is in
     * two shards, and a lookup by name finds the one the index means. */
    for (int k = 0; st == VKG_OK && k < n_names; k++) {
        const int n = vkg_safetensors_count(c->files[k]);
        for (int i = 0; i < n && st == VKG_OK; i++) {
            const vkg_st_tensor *t = vkg_safetensors_tensor(c->files[k], i);
            const char *s = vkg_json_string(vkg_json_get(map, t->name), NULL);
            if (!s)
                st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: shard %s holds tensor %.80s, which the index does not "
                                   "list", c->path, names[k], t->name);
            else if (strcmp(s, names[k]) != 0)
                st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %.80s is in shard %s, but the index puts it in %s",
                                   c->path, t->name, names[k], s);
        }
    }
    for (size_t i = 0; st == VKG_OK && i < entries; i++) {
        size_t klen;
        const char *key = vkg_json_key_at(map, i, &klen);
        const char *s = vkg_json_string(vkg_json_at(map, i), NULL);
        int k = 0;
        while (strcmp(names[k], s) != 0) k++;
        if (strlen(key) != klen || !vkg_safetensors_find(c->files[k], key))
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor \"%.*s\" is not in shard %s, where the index puts it",
                               c->path, (int)(klen > 80 ? 80 : klen), key, s);
    }
    free(names);
    return st;
}

static vkg_status open_into(vkg_checkpoint *c, const char *dir, vkg_error *err) {
    char *index = vkg_path_join(dir, VKG_CHECKPOINT_INDEX), *single = vkg_path_join(dir, "model.safetensors");
    vkg_status st = VKG_OK;
    struct stat sb;
    if (!index || !single) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    else if (stat(single, &sb) == 0) {
        /* transformers reads model.safetensors first when both are there */
        c->path = single;
        single = NULL;
        c->files = calloc(1, sizeof *c->files);
        if (!c->files) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        else if ((st = vkg_safetensors_open(c->path, &c->files[0], err)) == VKG_OK) c->n = 1;
    } else if (stat(index, &sb) == 0) {
        c->path = index;
        index = NULL;
        vkg_json *root = NULL;
        st = vkg_json_parse_file(c->path, &root, err);
        if (st == VKG_OK) st = open_shards(c, dir, root, err);
        vkg_json_free(root);
    } else {
        char *bin = vkg_path_join(dir, "pytorch_model.bin");
        int has_bin = bin && stat(bin, &sb) == 0;
        free(bin);
        st = vkg_error_set(err, VKG_ERR_IO, "%s: no model.safetensors or %s%s", dir, VKG_CHECKPOINT_INDEX,
                           has_bin ? " (only pytorch_model.bin, which is not read: save the model with "
                                     "safe_serialization=True, or download model.safetensors)" : "");
    }
    free(index);
    free(single);
    return st;
}

vkg_status vkg_checkpoint_open(const char *dir, vkg_checkpoint **out, vkg_error *err) {
    *out = NULL;
    vkg_checkpoint *c = calloc(1, sizeof *c);
    if (!c) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    vkg_status st = open_into(c, dir, err);
    if (st != VKG_OK) {
        vkg_checkpoint_close(c);
        return st;
    }
    *out = c;
    return VKG_OK;
}
