/* Added tokens: tokenizer.json's added_tokens, found inside a text before the model runs, as
 * tokenizers' AddedVocabulary finds them.
 *
 * Tokens with normalized false are looked for in the raw text; those with normalized true in
 * each stretch between the first kind after it is normalized (their content normalized the same
 * way).  Matching is leftmost-longest and never overlaps; a match rejected (single_word and a
 * word character beside it, or a special token while special tokens are read as text) is
 * skipped whole, as the automaton tokenizers uses skips it.  lstrip and rstrip make a match take
 * the whitespace before or after it. */
#include "io/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

void tok_added_free(tok_added *a) {
    for (size_t i = 0; i < a->n; i++) free(a->tok[i].content);
    free(a->tok);
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < 256; b++) free(a->bucket[k][b]);
    *a = (tok_added){0};
}

static vkg_status push(tok_added *a, const char *content, size_t len, tok_added_token t, vkg_error *err) {
    tok_added_token *bigger = realloc(a->tok, (a->n + 1) * sizeof *bigger);
    if (!bigger) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    a->tok = bigger;
    t.content = malloc(len + 1);
    if (!t.content) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(t.content, content, len);
    t.content[len] = '\0';
    t.len = len;
    a->tok[a->n++] = t;
    return VKG_OK;
}

vkg_status tok_added_push(tok_added *a, const char *content, size_t len, int32_t id, int special, vkg_error *err) {
    return push(a, content, len, (tok_added_token){.id = id, .special = special}, err);
}

static int flag(const vkg_json *o, const char *name, int dflt) {
    const vkg_json *v = vkg_json_get(o, name);
    return vkg_json_type_of(v) == VKG_JSON_BOOL ? vkg_json_bool(v) : dflt;
}

vkg_status tok_added_parse(tok_added *a, const vkg_json *added, const tok_normalizer *norm, vkg_error *err) {
    tok_buf normalized = {0};
    vkg_status st = VKG_OK;
    for (size_t i = 0; st == VKG_OK && i < vkg_json_length(added); i++) {
        const vkg_json *o = vkg_json_at(added, i);
        size_t len = 0;
        const char *content = vkg_json_string(vkg_json_get(o, "content"), &len); /* checked by the vocabulary */
        tok_added_token t = {.id = (int32_t)vkg_json_number(vkg_json_get(o, "id"))};
        t.special = flag(o, "special", 0);
        t.lstrip = flag(o, "lstrip", 0);
        t.rstrip = flag(o, "rstrip", 0);
        t.single_word = flag(o, "single_word", 0);
        t.normalized = flag(o, "normalized", !t.special);
        if (t.normalized && norm) {
            st = tok_normalize(norm, content, len, &normalized, err);
            content = normalized.data;
            len = normalized.len;
        }
        if (st == VKG_OK) st = push(a, content, len, t, err);
    }
    tok_buf_free(&normalized);
    return st;
}

static int ascending(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

vkg_status tok_added_index(tok_added *a, vkg_error *err) {
    /* One sort of keys (kind, first byte, longest first, index): each bucket is then a run. */
    enum { LEN_BITS = 23 };
    const uint64_t len_max = (1u << LEN_BITS) - 1;
    uint64_t *keys = malloc((a->n ? a->n : 1) * sizeof *keys);
    if (!keys) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < a->n && i <= UINT32_MAX; i++) {
        const tok_added_token *t = &a->tok[i];
        if (t->len == 0) continue; /* matches nothing */
        uint64_t len = t->len < len_max ? t->len : len_max;
        keys[n++] = ((uint64_t)(t->normalized ? 1 : 0) << 63) | ((uint64_t)(unsigned char)t->content[0] << 55) |
                    ((len_max - len) << 32) | i;
    }
    qsort(keys, n, sizeof *keys, ascending);
    vkg_status st = VKG_OK;
    for (size_t i = 0; i < n && st == VKG_OK;) {
        size_t j = i;
        while (j < n && keys[j] >> 55 == keys[i] >> 55) j++;
        int k = (int)(keys[i] >> 63), b = (int)((keys[i] >> 55) & 0xFF);
        if (!(a->bucket[k][b] = malloc((j - i) * sizeof *a->bucket[k][b])))
            st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        for (size_t m = i; st == VKG_OK && m < j; m++) a->bucket[k][b][m - i] = (uint32_t)keys[m];
        if (st == VKG_OK) a->bucket_n[k][b] = (uint32_t)(j - i);
        i = j;
    }
    free(keys);
    return st;
}

static int is_word_char(uint32_t cp) {
    if (cp == '_') return 1;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

static uint32_t char_before(const char *s, size_t at) {
    size_t c = at - 1, k;
    while (c > 0 && ((unsigned char)s[c] & 0xC0) == 0x80) c--;
    return tok_utf8_decode(s + c, &k);
}

size_t tok_added_find(const tok_added *a, int normalized, const char *s, size_t len, int split_special,
                      tok_added_match **out) {
    *out = NULL;
    size_t n = 0, cap = 0, done = 0; /* done: the end of the last match taken */
    for (size_t i = 0; i < len;) {
        unsigned b = (unsigned char)s[i];
        const tok_added_token *hit = NULL;
        for (uint32_t k = 0; k < a->bucket_n[normalized][b]; k++) {
            const tok_added_token *t = &a->tok[a->bucket[normalized][b][k]];
            if (t->len <= len - i && !memcmp(s + i, t->content, t->len)) {
                hit = t;
                break;
            }
        }
        if (!hit) {
            i++;
            continue;
        }
        size_t start = i, stop = i + hit->len, k;
        i = stop;
        if (split_special && hit->special) continue;
        if (hit->single_word && ((start > 0 && is_word_char(char_before(s, start))) ||
                                 (stop < len && is_word_char(tok_utf8_decode(s + stop, &k)))))
            continue;
        if (hit->lstrip)
            while (start > done && tok_is_whitespace(char_before(s, start))) {
                size_t c = start - 1;
                while (c > 0 && ((unsigned char)s[c] & 0xC0) == 0x80) c--;
                start = c;
            }
        if (hit->rstrip)
            while (stop < len && tok_is_whitespace(tok_utf8_decode(s + stop, &k))) stop += k;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            tok_added_match *bigger = realloc(*out, cap * sizeof *bigger);
            if (!bigger) {
                free(*out);
                *out = NULL;
                return (size_t)-1;
            }
            *out = bigger;
        }
        (*out)[n++] = (tok_added_match){start, stop, hit->id};
        done = i = stop;
    }
    return n;
}
