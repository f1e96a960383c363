/* The tokenizer: loading its files into the pipeline of components (tok_internal.h), encoding
 * and decoding.  The behaviour it matches, and why, is described in tokenizer.h. */
#include "io/tokenizer.h"

#include "io/tok_internal.h"
#include "io/tokenizer_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct vkg_tokenizer {
    tok_normalizer *norm;
    tok_pretok *pre;
    tok_bpe bpe;
    tok_added added;
    tok_post post;
    tok_decoder *dec;
    int32_t eot;
    int32_t eos;                   /* tokenizer_config.json's eos_token, else eot */
    uint32_t *byte_off, *byte_len; /* id -> its bytes (token_bytes) in bytes */
    char *bytes;
};

/* Checks RFC 3629 UTF-8.  Returns 1 when valid; else sets *bad to the offset of the offending
 * sequence and writes the reason into why. */
static int utf8_validate(const unsigned char *s, size_t len, size_t *bad, char *why, size_t why_size) {
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t need;
        uint32_t cp, min;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { need = 1; cp = c & 0x1F; min = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; cp = c & 0x0F; min = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; cp = c & 0x07; min = 0x10000; }
        else {
            *bad = i;
            if (c < 0xC0) snprintf(why, why_size, "continuation byte 0x%02X with no lead byte", c);
            else if (c < 0xC2) snprintf(why, why_size, "byte 0x%02X can only start an overlong encoding", c);
            else snprintf(why, why_size, "byte 0x%02X never appears in UTF-8", c);
            return 0;
        }
        for (size_t k = 1; k <= need; k++) {
            if (i + k >= len) {
                *bad = i;
                snprintf(why, why_size, "sequence starting with 0x%02X is cut off by the end of the text", c);
                return 0;
            }
            if ((s[i + k] & 0xC0) != 0x80) {
                *bad = i;
                snprintf(why, why_size, "lead byte 0x%02X is followed by 0x%02X, not a continuation byte", c,
                         s[i + k]);
                return 0;
            }
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        *bad = i;
        if (cp < min) { snprintf(why, why_size, "overlong encoding of U+%04X", (unsigned)cp); return 0; }
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            snprintf(why, why_size, "encoded surrogate U+%04X", (unsigned)cp);
            return 0;
        }
        if (cp > 0x10FFFF) { snprintf(why, why_size, "code point above U+10FFFF"); return 0; }
        i += need + 1;
    }
    return 1;
}


void vkg_tokenizer_free(vkg_tokenizer *t) {
    if (!t) return;
    tok_normalizer_free(t->norm);
    tok_pretok_free(t->pre);
    tok_bpe_free(&t->bpe);
    tok_added_free(&t->added);
    tok_post_free(&t->post);
    tok_decoder_free(t->dec);
    free(t->byte_off);
    free(t->byte_len);
    free(t->bytes);
    free(t);
}

int32_t vkg_tokenizer_vocab_size(const vkg_tokenizer *t) { return t ? t->bpe.vocab.n : 0; }
int32_t vkg_tokenizer_eot(const vkg_tokenizer *t) { return t ? t->eot : -1; }
int32_t vkg_tokenizer_eos(const vkg_tokenizer *t) { return t ? t->eos : -1; }

const char *vkg_tokenizer_token_bytes(const vkg_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->bpe.vocab.n) return NULL;
    if (len) *len = t->byte_len[id];
    return t->bytes + t->byte_off[id];
}

/* ----------------------------------------------------------------------------------------------
 * Loading
 * -------------------------------------------------------------------------------------------- */

/* Any entry counts, so that a FIFO or directory in a tokenizer's place is reported as such when
 * it is opened, rather than as a missing file. */
static int is_present(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Each token's bytes as the decoders give it alone (token_bytes): for byte-level vocabularies
 * the bytes it spells, for SentencePiece ones the text with U+2581 as a space and <0xNN> as its
 * byte. */
static vkg_status token_bytes_table(vkg_tokenizer *t, vkg_error *err) {
    const tok_vocab *v = &t->bpe.vocab;
    t->byte_off = malloc((size_t)v->n * sizeof *t->byte_off);
    t->byte_len = malloc((size_t)v->n * sizeof *t->byte_len);
    if (!t->byte_off || !t->byte_len) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    tok_buf all = {0};
    tok_pieces p = {0};
    vkg_status st = VKG_OK;
    for (int32_t id = 0; st == VKG_OK && id < v->n; id++) {
        tok_pieces_clear(&p);
        tok_pieces_add(&p, v->strs + v->off[id], v->len[id], 1);
        st = tok_decode(t->dec, &p, 0, err);
        t->byte_off[id] = (uint32_t)all.len;
        for (size_t i = 0; st == VKG_OK && i < p.n; i++) tok_buf_put(&all, tok_piece(&p, i), p.span[i].len);
        t->byte_len[id] = (uint32_t)(all.len - t->byte_off[id]);
        if (all.len > UINT32_MAX / 2) st = vkg_error_set(err, VKG_ERR_FORMAT, "the tokens are too long");
    }
    tok_buf_put(&all, "", 0);
    tok_pieces_free(&p);
    if (st == VKG_OK && all.oom) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    t->bytes = all.data;
    return st;
}

/* A token's id by its text: the vocabulary's, else an added token's; -1 when neither has it. */
static int32_t token_id(const vkg_tokenizer *t, const char *s, size_t len) {
    int32_t id = tok_vocab_find(&t->bpe.vocab, s, len);
    for (size_t i = 0; id < 0 && i < t->added.n; i++)
        if (t->added.tok[i].len == len && !memcmp(t->added.tok[i].content, s, len)) id = t->added.tok[i].id;
    return id;
}

static void find_eot(vkg_tokenizer *t) { t->eot = token_id(t, "<|endoftext|>", 13); }

/* One special token of the rebuilt post-processor (see apply_config). */
static vkg_status post_token(const vkg_tokenizer *t, const char *text, const char *key, const char *path,
                             int32_t **ids, size_t *n, vkg_error *err) {
    const int32_t id = token_id(t, text, strlen(text));
    if (id < 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: %s \"%.60s\" is not a token of the tokenizer, and add_%s "
                             "asks for it around every text", path, key, text, key);
    if (!(*ids = malloc(sizeof **ids))) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    **ids = id;
    *n = 1;
    return VKG_OK;
}

/* tokenizer_config.json beside the tokenizer: its eos_token is the tokenizer's eos, and the
 * classes that honour add_bos_token / add_eos_token (Llama's) get the post-processor
 * transformers builds from them in place of tokenizer.json's: "<s> $A" by default. */
static vkg_status apply_config(vkg_tokenizer *t, const char *dir, vkg_error *err) {
    vkg_json *cfg = NULL;
    char *path = NULL;
    t->eos = t->eot;
    vkg_status st = vkg_tokenizer_config_read(dir, &cfg, &path, err);
    const char *bos = NULL, *eos = NULL;
    if (st == VKG_OK && cfg) st = vkg_tokenizer_config_token(cfg, "eos_token", path, &eos, err);
    if (st == VKG_OK && cfg) st = vkg_tokenizer_config_token(cfg, "bos_token", path, &bos, err);
    if (st == VKG_OK && eos && token_id(t, eos, strlen(eos)) >= 0) t->eos = token_id(t, eos, strlen(eos));
    if (st == VKG_OK && cfg && vkg_tokenizer_config_honours_add_tokens(cfg)) {
        int add_bos = 1, add_eos = 0;
        const vkg_json *b = vkg_json_get(cfg, "add_bos_token"), *e = vkg_json_get(cfg, "add_eos_token");
        if (vkg_json_type_of(b) == VKG_JSON_BOOL) add_bos = vkg_json_bool(b);
        if (vkg_json_type_of(e) == VKG_JSON_BOOL) add_eos = vkg_json_bool(e);
        tok_post post = {0};
        if (add_bos) st = post_token(t, bos ? bos : "<s>", "bos_token", path, &post.before, &post.n_before, err);
        if (st == VKG_OK && add_eos)
            st = post_token(t, eos ? eos : "</s>", "eos_token", path, &post.after, &post.n_after, err);
        if (st == VKG_OK) {
            tok_post_free(&t->post);
            t->post = post;
        } else {
            tok_post_free(&post);
        }
    }
    vkg_json_free(cfg);
    free(path);
    return st;
}

/* tokenizer.json: each component built by its unit from its "type". */
static vkg_status load_tokenizer_json(vkg_tokenizer *t, const char *path, vkg_error *err) {
    vkg_json *root = NULL;
    vkg_status st = vkg_json_parse_file(path, &root, err);
    if (st != VKG_OK) return st;
    const vkg_json *model = vkg_json_get(root, "model"), *type = vkg_json_get(model, "type");
    const vkg_json *added = vkg_json_get(root, "added_tokens");
    const char *type_name = vkg_json_string(type, NULL);
    size_t where_size = strlen(path) + 32;
    char *where = malloc(where_size);
    if (!where) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    else if (vkg_json_type_of(root) != VKG_JSON_OBJECT)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: expected an object (a tokenizers tokenizer.json), found %s", path,
                           vkg_json_type_name(vkg_json_type_of(root)));
    else if (!model)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: no \"model\": not a tokenizers tokenizer.json", path);
    else if (vkg_json_type_of(model) != VKG_JSON_OBJECT)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: model is %s, expected an object", path,
                           vkg_json_type_name(vkg_json_type_of(model)));
    else if (type && !type_name)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: model.type is %s, expected a string", path,
                           vkg_json_type_name(vkg_json_type_of(type)));
    else if (type_name && strcmp(type_name, "BPE") != 0)
        st = vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: model.type is \"%s\": vkgraph reads BPE tokenizers "
                           "only (docs/TOKENIZERS.md)", path, type_name);
    else if (vkg_json_type_of(added) != VKG_JSON_NULL && vkg_json_type_of(added) != VKG_JSON_ARRAY)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: added_tokens is %s, expected an array", path,
                           vkg_json_type_name(vkg_json_type_of(added)));
    if (st == VKG_OK) st = tok_bpe_parse(&t->bpe, model, added, path, err);
    if (st == VKG_OK) {
        snprintf(where, where_size, "%s: normalizer", path);
        st = tok_normalizer_parse(vkg_json_get(root, "normalizer"), where, &t->norm, err);
    }
    if (st == VKG_OK) {
        snprintf(where, where_size, "%s: pre_tokenizer", path);
        st = tok_pretok_parse(vkg_json_get(root, "pre_tokenizer"), where, &t->pre, err);
    }
    if (st == VKG_OK) {
        snprintf(where, where_size, "%s: post_processor", path);
        st = tok_post_parse(&t->post, vkg_json_get(root, "post_processor"), &t->bpe.vocab, where, err);
    }
    if (st == VKG_OK) {
        snprintf(where, where_size, "%s: decoder", path);
        st = tok_decoder_parse(vkg_json_get(root, "decoder"), where, &t->dec, err);
    }
    if (st == VKG_OK) st = tok_added_parse(&t->added, added, t->norm, err);
    free(where);
    vkg_json_free(root);
    return st;
}

/* vocab.json + merges.txt or encoder.json + vocab.bpe: GPT-2's pipeline, as transformers builds
 * it for these files (its tokenizer registers "<|endoftext|>" as a special token). */
static vkg_status load_vocab_files(vkg_tokenizer *t, const char *vocab_path, const char *merges_path,
                                   vkg_error *err) {
    vkg_status st = tok_bpe_load_files(&t->bpe, vocab_path, merges_path, err);
    if (st == VKG_OK) st = tok_pretok_gpt2(&t->pre, err);
    if (st == VKG_OK) st = tok_decoder_byte_level(&t->dec, err);
    int32_t eot = st == VKG_OK ? tok_vocab_find(&t->bpe.vocab, "<|endoftext|>", 13) : -1;
    if (eot >= 0) st = tok_added_push(&t->added, "<|endoftext|>", 13, eot, 1, err);
    return st;
}

static int is_regular(const char *dir, const char *name) {
    char path[4096];
    struct stat st;
    return snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path && stat(path, &st) == 0 &&
           S_ISREG(st.st_mode);
}

int vkg_tokenizer_present(const char *dir) {
    return is_regular(dir, "tokenizer.json") || (is_regular(dir, "vocab.json") && is_regular(dir, "merges.txt")) ||
           (is_regular(dir, "encoder.json") && is_regular(dir, "vocab.bpe"));
}

static vkg_status finish(vkg_tokenizer *t, vkg_error *err) {
    vkg_status st = tok_added_index(&t->added, err);
    if (st == VKG_OK) st = token_bytes_table(t, err);
    if (st == VKG_OK) find_eot(t);
    return st;
}

vkg_status vkg_tokenizer_load(const char *dir, vkg_tokenizer **out, vkg_error *err) {
    if (out) *out = NULL;
    if (!dir || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_tokenizer_load: NULL argument");
    /* tokenizer.json first, as transformers' AutoTokenizer (the fast tokenizer) reads it when it
     * is there; then Hugging Face's pair, then OpenAI's; a half pair is reported as such. */
    static const char *const names[3][2] = {{"tokenizer.json", NULL}, {"vocab.json", "merges.txt"},
                                            {"encoder.json", "vocab.bpe"}};
    size_t dlen = strlen(dir);
    char *paths[3][2] = {{0}};
    int found[3][2] = {{0}}, set = -1;
    vkg_status st = VKG_OK;
    for (int p = 0; p < 3; p++)
        for (int f = 0; f < 2 && names[p][f]; f++) {
            paths[p][f] = malloc(dlen + strlen(names[p][f]) + 2);
            if (!paths[p][f]) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
            else {
                sprintf(paths[p][f], "%s/%s", dir, names[p][f]);
                found[p][f] = is_present(paths[p][f]);
            }
        }
    for (int p = 0; st == VKG_OK && set < 0 && p < 3; p++)
        if (found[p][0] || found[p][1]) set = p;
    if (st == VKG_OK && set < 0)
        st = vkg_error_set(err, VKG_ERR_IO, "no tokenizer in %s: looked for tokenizer.json, vocab.json + "
                           "merges.txt and encoder.json + vocab.bpe", dir);
    if (st == VKG_OK && set > 0 && !(found[set][0] && found[set][1])) {
        int missing = found[set][0] ? 1 : 0;
        st = vkg_error_set(err, VKG_ERR_IO, "incomplete tokenizer in %s: %s is there but %s is missing", dir,
                           names[set][1 - missing], names[set][missing]);
    }
    vkg_tokenizer *t = NULL;
    if (st == VKG_OK && !(t = calloc(1, sizeof *t))) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == VKG_OK)
        st = set == 0 ? load_tokenizer_json(t, paths[0][0], err) : load_vocab_files(t, paths[set][0], paths[set][1], err);
    if (st == VKG_OK) st = finish(t, err);
    if (st == VKG_OK) st = apply_config(t, dir, err);
    for (int p = 0; p < 3; p++)
        for (int f = 0; f < 2; f++) free(paths[p][f]);
    if (st != VKG_OK) {
        vkg_tokenizer_free(t);
        return st;
    }
    *out = t;
    return VKG_OK;
}

/* ----------------------------------------------------------------------------------------------
 * Encoding
 * -------------------------------------------------------------------------------------------- */

typedef struct encode_state {
    const vkg_tokenizer *t;
    tok_buf norm;
    tok_pieces a, b;
    tok_bpe_work *work;
    int32_t *ids;
    size_t n, cap;
} encode_state;

static int push_ids(encode_state *e, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (e->n == e->cap) {
            size_t cap = e->cap ? 2 * e->cap : 256;
            int32_t *bigger = realloc(e->ids, cap * sizeof *bigger);
            if (!bigger) return 0;
            e->ids = bigger;
            e->cap = cap;
        }
        e->ids[e->n++] = ids[i];
    }
    return 1;
}

/* Text with no added tokens in it (already normalized): pre-tokenize, then BPE each piece. */
static vkg_status encode_plain(encode_state *e, const char *s, size_t len, int first, vkg_error *err) {
    if (len == 0) return VKG_OK;
    tok_pieces_clear(&e->a);
    tok_pieces_add(&e->a, s, len, first);
    vkg_status st = tok_pretokenize(e->t->pre, &e->a, &e->b, err);
    for (size_t i = 0; st == VKG_OK && i < e->b.n; i++)
        if (!tok_bpe_word(&e->t->bpe, e->work, tok_piece(&e->b, i), e->b.span[i].len, &e->ids, &e->n, &e->cap))
            st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory encoding");
    return st;
}

/* A stretch of the raw text between the added tokens matched there: normalized, then searched
 * for the added tokens that match normalized text. */
static vkg_status encode_stretch(encode_state *e, const char *s, size_t len, int first, int split_special,
                                 vkg_error *err) {
    if (len == 0) return VKG_OK;
    vkg_status st = tok_normalize(e->t->norm, s, len, &e->norm, err);
    if (st != VKG_OK) return st;
    tok_added_match *m = NULL;
    size_t count = tok_added_find(&e->t->added, 1, e->norm.data, e->norm.len, split_special, &m);
    if (count == (size_t)-1) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory encoding");
    /* encode_plain reuses the pieces, not e->norm: the normalized text stays put */
    size_t at = 0;
    for (size_t i = 0; st == VKG_OK && i <= count; i++) {
        size_t end = i < count ? m[i].start : e->norm.len;
        st = encode_plain(e, e->norm.data + at, end - at, first && at == 0, err);
        if (st == VKG_OK && i < count) {
            if (!push_ids(e, &m[i].id, 1)) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory encoding");
            at = m[i].end;
        }
    }
    free(m);
    return st;
}

vkg_status vkg_tokenizer_encode_with(const vkg_tokenizer *t, const char *text, size_t len, unsigned flags,
                                     int32_t **ids, size_t *n, vkg_error *err) {
    if (ids) *ids = NULL;
    if (n) *n = 0;
    if (!t || !ids || !n || (!text && len > 0))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_tokenizer_encode: NULL argument");
    if (flags & ~(unsigned)(VKG_TOKENIZE_NO_SPECIAL | VKG_TOKENIZE_SPLIT_SPECIAL))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_tokenizer_encode: unknown flags 0x%x", flags);
    if (len > (size_t)INT32_MAX / 4) /* symbols are indexed with int32_t, after respelling */
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "text of %zu bytes is too long to encode", len);
    size_t bad;
    char why[128];
    if (!utf8_validate((const unsigned char *)text, len, &bad, why, sizeof why))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "invalid UTF-8 at byte %zu: %s", bad, why);
    int split_special = (flags & VKG_TOKENIZE_SPLIT_SPECIAL) != 0, add_special = !(flags & VKG_TOKENIZE_NO_SPECIAL);
    encode_state e = {.t = t};
    vkg_status st = VKG_OK;
    if (!(e.work = tok_bpe_work_new())) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory encoding");
    if (st == VKG_OK && add_special && !push_ids(&e, t->post.before, t->post.n_before))
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory encoding");
    tok_added_match *m = NULL;
    size_t count = 0;
    if (st == VKG_OK && len > 0) {
        count = tok_added_find(&t->added, 0, text, len, split_special, &m);
        if (count == (size_t)-1) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory encoding");
    }
    size_t at = 0;
    for (size_t i = 0; st == VKG_OK && len > 0 && i <= count; i++) {
        size_t end = i < count ? m[i].start : len;
        st = encode_stretch(&e, text + at, end - at, at == 0, split_special, err);
        if (st == VKG_OK && i < count) {
            if (!push_ids(&e, &m[i].id, 1)) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory encoding");
            at = m[i].end;
        }
    }
    if (st == VKG_OK && add_special && !push_ids(&e, t->post.after, t->post.n_after))
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory encoding");
    free(m);
    tok_bpe_work_free(e.work);
    tok_buf_free(&e.norm);
    tok_pieces_free(&e.a);
    tok_pieces_free(&e.b);
    if (st != VKG_OK || e.n == 0) {
        free(e.ids);
        return st;
    }
    *ids = e.ids;
    *n = e.n;
    return VKG_OK;
}

vkg_status vkg_tokenizer_encode(const vkg_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
                                vkg_error *err) {
    return vkg_tokenizer_encode_with(t, text, len, 0, ids, n, err);
}

/* ----------------------------------------------------------------------------------------------
 * Decoding
 * -------------------------------------------------------------------------------------------- */

vkg_status vkg_tokenizer_decode(const vkg_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len,
                                vkg_error *err) {
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!t || !text || !len || (!ids && n > 0))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_tokenizer_decode: NULL argument");
    const tok_vocab *v = &t->bpe.vocab;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= v->n)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                                 "unknown token id %ld at position %zu (the vocabulary has ids 0..%ld)",
                                 (long)ids[i], i, (long)v->n - 1);
    tok_pieces p = {0};
    for (size_t i = 0; i < n; i++) tok_pieces_add(&p, v->strs + v->off[ids[i]], v->len[ids[i]], i == 0);
    vkg_status st = tok_pieces_failed(&p) ? vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory decoding")
                                          : tok_decode(t->dec, &p, 1, err);
    tok_buf out = {0};
    tok_buf_put(&out, "", 0);
    for (size_t i = 0; st == VKG_OK && i < p.n; i++) tok_buf_put(&out, tok_piece(&p, i), p.span[i].len);
    tok_pieces_free(&p);
    if (st == VKG_OK && out.oom) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory decoding %zu tokens", n);
    if (st != VKG_OK) {
        tok_buf_free(&out);
        return st;
    }
    *text = out.data;
    *len = out.len;
    return VKG_OK;
}
