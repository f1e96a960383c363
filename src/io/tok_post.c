/* Post-processors: the special tokens put around one sequence when add_special_tokens holds
 * (transformers' default).  TemplateProcessing (its "single" template: Llama's BOS),
 * RobertaProcessing and BertProcessing (cls ... sep), ByteLevel (offsets only: no ids) and a
 * Sequence of them.  Pairs of sequences are not encoded, so the "pair" templates are not read. */
#include "io/tok_internal.h"

#include <stdlib.h>
#include <string.h>

void tok_post_free(tok_post *p) {
    free(p->before);
    free(p->after);
    *p = (tok_post){0};
}

static vkg_status add_id(tok_post *p, int after, int32_t id, const char *where, vkg_error *err) {
    int32_t **list = after ? &p->after : &p->before;
    size_t *n = after ? &p->n_after : &p->n_before;
    if (*n >= 64) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: too many special tokens in the template", where);
    int32_t *bigger = realloc(*list, (*n + 1) * sizeof *bigger);
    if (!bigger) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    bigger[(*n)++] = id;
    *list = bigger;
    return VKG_OK;
}

static vkg_status checked_id(const vkg_json *v, const tok_vocab *vocab, const char *where, int32_t *id,
                             vkg_error *err) {
    double d = vkg_json_number(v);
    if (vkg_json_type_of(v) != VKG_JSON_NUMBER || !(d >= 0 && d < vocab->n) || d != (double)(int32_t)d)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: a special token's id is not an id of the vocabulary", where);
    *id = (int32_t)d;
    return VKG_OK;
}

static vkg_status template_single(tok_post *p, const vkg_json *v, const tok_vocab *vocab, const char *where,
                                  vkg_error *err) {
    const vkg_json *single = vkg_json_get(v, "single"), *specials = vkg_json_get(v, "special_tokens");
    if (vkg_json_type_of(single) != VKG_JSON_ARRAY)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: TemplateProcessing has no \"single\" array", where);
    int after = 0, seen_sequence = 0;
    for (size_t i = 0; i < vkg_json_length(single); i++) {
        const vkg_json *item = vkg_json_at(single, i), *special = vkg_json_get(item, "SpecialToken");
        if (vkg_json_get(item, "Sequence")) {
            if (seen_sequence)
                return vkg_error_set(err, VKG_ERR_FORMAT, "%s: the single template holds two sequences", where);
            seen_sequence = after = 1;
            continue;
        }
        size_t nlen = 0;
        const char *name = vkg_json_string(vkg_json_get(special, "id"), &nlen);
        const vkg_json *entry = name ? vkg_json_get_n(specials, name, nlen) : NULL;
        const vkg_json *ids = vkg_json_get(entry, "ids");
        if (!name || vkg_json_type_of(ids) != VKG_JSON_ARRAY)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: single[%zu] is not a Sequence or a SpecialToken listed in "
                                 "special_tokens with its ids", where, i);
        for (size_t k = 0; k < vkg_json_length(ids); k++) {
            int32_t id = -1;
            vkg_status st = checked_id(vkg_json_at(ids, k), vocab, where, &id, err);
            if (st == VKG_OK) st = add_id(p, after, id, where, err);
            if (st != VKG_OK) return st;
        }
    }
    if (!seen_sequence)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: the single template has no Sequence", where);
    return VKG_OK;
}

/* RobertaProcessing and BertProcessing: "cls": [token, id] before, "sep": [token, id] after. */
static vkg_status cls_sep(tok_post *p, const vkg_json *v, const tok_vocab *vocab, const char *where,
                          vkg_error *err) {
    int32_t id = -1;
    vkg_status st = checked_id(vkg_json_at(vkg_json_get(v, "cls"), 1), vocab, where, &id, err);
    if (st == VKG_OK) st = add_id(p, 0, id, where, err);
    if (st == VKG_OK) st = checked_id(vkg_json_at(vkg_json_get(v, "sep"), 1), vocab, where, &id, err);
    if (st == VKG_OK) st = add_id(p, 1, id, where, err);
    return st;
}

vkg_status tok_post_parse(tok_post *p, const vkg_json *v, const tok_vocab *vocab, const char *where,
                          vkg_error *err) {
    if (vkg_json_type_of(v) == VKG_JSON_NULL) return VKG_OK;
    const char *type = tok_type(v, where, err);
    if (!type) return err->status;
    if (!strcmp(type, "ByteLevel")) return VKG_OK;
    if (!strcmp(type, "TemplateProcessing")) return template_single(p, v, vocab, where, err);
    if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) return cls_sep(p, v, vocab, where, err);
    if (!strcmp(type, "Sequence")) {
        const vkg_json *list = vkg_json_get(v, "processors");
        if (vkg_json_type_of(list) != VKG_JSON_ARRAY)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: Sequence has no \"processors\" array", where);
        for (size_t i = 0; i < vkg_json_length(list); i++) {
            vkg_status st = tok_post_parse(p, vkg_json_at(list, i), vocab, where, err);
            if (st != VKG_OK) return st;
        }
        return VKG_OK;
    }
    return tok_unsupported(where, type, err);
}
