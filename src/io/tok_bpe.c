/* The BPE model: the vocabulary (id <-> token string), the merges, and one word to ids.
 *
 * A word starts as one symbol per character, each looked up in the vocabulary (a character
 * that is not there becomes its bytes' <0xNN> tokens with byte_fallback, else unk_token, fused
 * with an unk before it when fuse_unk, else nothing, as tokenizers does).  Then the adjacent
 * pair of lowest merge rank is merged, leftmost first among equal ranks, until no ranked pair is
 * left: a min-heap of candidate pairs, stale entries skipped when popped.  With ignore_merges a
 * word that is itself in the vocabulary is that one token.  Repeated words come from a cache. */
#include "io/tok_internal.h"

#include "base/file_open.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tok_merge {
    uint64_t key;
    int32_t rank; /* -1: empty slot */
    int32_t result;
} tok_merge;

static uint64_t str_hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t len) {
    if (!v->slots) return -1;
    for (size_t i = str_hash(s, len) & v->mask;; i = (i + 1) & v->mask) {
        uint32_t e = v->slots[i];
        if (!e) return -1;
        int32_t id = (int32_t)(e - 1);
        if (v->len[id] == len && !memcmp(v->strs + v->off[id], s, len)) return id;
    }
}

static void vocab_free(tok_vocab *v) {
    free(v->strs);
    free(v->off);
    free(v->len);
    free(v->slots);
    *v = (tok_vocab){0};
}

static uint64_t pair_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)l << 32) | (uint32_t)r; }
static size_t pair_hash(uint64_t key, size_t mask) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 29) & mask; }

static const tok_merge *merge_find(const tok_bpe *b, int32_t l, int32_t r) {
    uint64_t key = pair_key(l, r);
    for (size_t i = pair_hash(key, b->merge_mask);; i = (i + 1) & b->merge_mask) {
        const tok_merge *m = &b->merges[i];
        if (m->rank < 0) return NULL;
        if (m->key == key) return m;
    }
}

void tok_bpe_free(tok_bpe *b) {
    vocab_free(&b->vocab);
    free(b->merges);
    b->merges = NULL;
}

/* ---- loading -------------------------------------------------------------------------------- */

/* Fills the vocabulary from the token -> id object vocab and the added tokens it lacks (added
 * may be NULL).  Ids must be 0..N-1 over both.  where starts the messages. */
static vkg_status build_vocab(tok_vocab *v, const vkg_json *vocab, const vkg_json *added, const char *where,
                              vkg_error *err) {
    if (vkg_json_type_of(vocab) != VKG_JSON_OBJECT)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: expected an object mapping each token to its id, found %s",
                             where, vkg_json_type_name(vkg_json_type_of(vocab)));
    size_t n_vocab = vkg_json_length(vocab), n_added = vkg_json_length(added), n = n_vocab, bytes = 0;
    if (n_vocab == 0) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: the vocabulary is empty", where);
    for (size_t i = 0; i < n_added; i++) {
        const vkg_json *a = vkg_json_at(added, i), *id = vkg_json_get(a, "id");
        size_t clen = 0;
        const char *content = vkg_json_string(vkg_json_get(a, "content"), &clen);
        if (vkg_json_type_of(id) != VKG_JSON_NUMBER || !content)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: added_tokens[%zu] is not {\"id\": number, \"content\": "
                                 "string}", where, i);
        const vkg_json *in_vocab = vkg_json_get_n(vocab, content, clen);
        int shown = clen > 80 ? 80 : (int)clen;
        if (in_vocab && vkg_json_number(in_vocab) != vkg_json_number(id))
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: added_tokens[%zu] gives \"%.*s\" id %.17g, but model.vocab "
                                 "gives it %.17g", where, i, shown, content, vkg_json_number(id),
                                 vkg_json_number(in_vocab));
        if (!in_vocab) {
            n++;
            bytes += clen;
        }
    }
    for (size_t i = 0; i < n_vocab; i++) {
        size_t klen;
        vkg_json_key_at(vocab, i, &klen);
        bytes += klen;
    }
    if (n > INT32_MAX / 2 || bytes > UINT32_MAX)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: too many tokens (%zu, %zu bytes)", where, n, bytes);
    size_t slots = 16;
    while (slots < 2 * n_vocab) slots *= 2;
    v->n = (int32_t)n;
    v->off = malloc(n * sizeof *v->off);
    v->len = malloc(n * sizeof *v->len);
    v->strs = malloc(bytes + 1);
    v->slots = calloc(slots, sizeof *v->slots);
    v->mask = slots - 1;
    if (!v->off || !v->len || !v->strs || !v->slots)
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory loading %s", where);
    for (size_t i = 0; i < n; i++) v->len[i] = UINT32_MAX; /* not yet seen */
    uint32_t used = 0;
    for (size_t i = 0; i < n_vocab + n_added; i++) {
        size_t klen;
        const char *key;
        const vkg_json *value;
        char entry[64];
        if (i < n_vocab) {
            key = vkg_json_key_at(vocab, i, &klen);
            value = vkg_json_at(vocab, i);
            snprintf(entry, sizeof entry, "entry %zu", i + 1);
        } else {
            const vkg_json *a = vkg_json_at(added, i - n_vocab);
            key = vkg_json_string(vkg_json_get(a, "content"), &klen);
            if (vkg_json_get_n(vocab, key, klen)) continue; /* checked to agree */
            value = vkg_json_get(a, "id");
            snprintf(entry, sizeof entry, "added_tokens[%zu]", i - n_vocab);
        }
        int shown = klen > 80 ? 80 : (int)klen;
        if (vkg_json_type_of(value) != VKG_JSON_NUMBER)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: %s (token \"%.*s\"): the id is %s, expected a number",
                                 where, entry, shown, key, vkg_json_type_name(vkg_json_type_of(value)));
        double d = vkg_json_number(value);
        if (!(d >= 0 && d < (double)n) || d != (double)(int32_t)d)
            return vkg_error_set(err, VKG_ERR_FORMAT,
                                 "%s: %s (token \"%.*s\"): id %.17g is not an integer in 0..%zu "
                                 "(ids must be 0..N-1 for N tokens)", where, entry, shown, key, d, n - 1);
        int32_t id = (int32_t)d;
        if (v->len[id] != UINT32_MAX)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: %s (token \"%.*s\"): id %d is already used", where,
                                 entry, shown, key, (int)id);
        v->off[id] = used;
        v->len[id] = (uint32_t)klen;
        memcpy(v->strs + used, key, klen);
        used += (uint32_t)klen;
        if (i < n_vocab) { /* only the model's own tokens are looked up by BPE */
            size_t s = str_hash(key, klen) & v->mask;
            while (v->slots[s]) s = (s + 1) & v->mask;
            v->slots[s] = (uint32_t)id + 1;
        }
    }
    v->strs[used] = '\0';
    return VKG_OK;
}

static vkg_status merges_alloc(tok_bpe *b, size_t count, vkg_error *err) {
    size_t slots = 16;
    while (slots < 2 * count) slots *= 2;
    b->merges = malloc(slots * sizeof *b->merges);
    if (!b->merges) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for %zu merges", count);
    b->merge_mask = slots - 1;
    for (size_t i = 0; i < slots; i++) b->merges[i].rank = -1;
    return VKG_OK;
}

/* One merge of rank rank: LEFT, RIGHT and their join must all be tokens.  A pair listed twice
 * keeps the later rank, as the references' dictionaries do. */
static vkg_status add_merge(tok_bpe *b, const char *left, size_t left_len, const char *right, size_t right_len,
                            tok_buf *joined, int32_t rank, const char *where, const char *vocab_name,
                            vkg_error *err) {
    int32_t l = tok_vocab_find(&b->vocab, left, left_len), r = tok_vocab_find(&b->vocab, right, right_len);
    if (l < 0 || r < 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: token \"%.*s\" is not in %s", where,
                             l < 0 ? (int)left_len : (int)right_len, l < 0 ? left : right, vocab_name);
    joined->len = 0;
    tok_buf_put(joined, left, left_len);
    tok_buf_put(joined, right, right_len);
    if (joined->oom) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    int32_t result = tok_vocab_find(&b->vocab, joined->data, joined->len);
    if (result < 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: merging \"%.*s\" and \"%.*s\" makes a token that is not in %s",
                             where, (int)left_len, left, (int)right_len, right, vocab_name);
    uint64_t key = pair_key(l, r);
    size_t i = pair_hash(key, b->merge_mask);
    while (b->merges[i].rank >= 0 && b->merges[i].key != key) i = (i + 1) & b->merge_mask;
    b->merges[i] = (tok_merge){key, rank, result};
    return VKG_OK;
}

static void find_byte_tokens(tok_bpe *b) {
    for (unsigned x = 0; x < 256; x++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", x);
        b->byte_ids[x] = tok_vocab_find(&b->vocab, name, 6);
    }
}

#define MARKER "\xE2\x96\x81" /* U+2581, SentencePiece's space */

/* Without a pre-tokenizer (Llama 2's tokenizer.json) BPE runs on the whole text as one word.
 * When U+2581 is a token and every token holds it only in a leading run (as SentencePiece
 * vocabularies do), no merge can join a character to a U+2581 after it, so the word can be cut
 * before each U+2581 that follows another character and the parts encoded alone, each through
 * the cache, with the same ids.  Not with ignore_merges, which looks at the whole word. */
static int marker_splits(const tok_bpe *b) {
    if (b->ignore_merges || tok_vocab_find(&b->vocab, MARKER, 3) < 0) return 0;
    for (size_t i = 0; i <= b->vocab.mask; i++) {
        uint32_t e = b->vocab.slots[i];
        if (!e) continue;
        const char *s = b->vocab.strs + b->vocab.off[e - 1];
        size_t len = b->vocab.len[e - 1], k = 0;
        while (k + 3 <= len && !memcmp(s + k, MARKER, 3)) k += 3;
        for (; k + 3 <= len; k++)
            if (!memcmp(s + k, MARKER, 3)) return 0;
    }
    return 1;
}

static int nonempty_string(const vkg_json *v) {
    size_t len = 0;
    return vkg_json_string(v, &len) && len > 0;
}

vkg_status tok_bpe_parse(tok_bpe *b, const vkg_json *model, const vkg_json *added, const char *path,
                         vkg_error *err) {
    const vkg_json *merges = vkg_json_get(model, "merges"), *dropout = vkg_json_get(model, "dropout");
    if (nonempty_string(vkg_json_get(model, "continuing_subword_prefix")) ||
        nonempty_string(vkg_json_get(model, "end_of_word_suffix")))
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: model.continuing_subword_prefix and "
                             "model.end_of_word_suffix are not supported", path);
    if (vkg_json_type_of(dropout) == VKG_JSON_NUMBER && vkg_json_number(dropout) > 0)
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: model.dropout is not supported (ids would be random)",
                             path);
    if (!vkg_json_get(model, "vocab")) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: model has no \"vocab\"", path);
    if (vkg_json_type_of(merges) != VKG_JSON_ARRAY)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: model.merges is %s, expected an array", path,
                             merges ? vkg_json_type_name(vkg_json_type_of(merges)) : "missing");
    size_t where_size = strlen(path) + 48;
    char *where = malloc(where_size);
    if (!where) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(where, where_size, "%s: model.vocab", path);
    vkg_status st = build_vocab(&b->vocab, vkg_json_get(model, "vocab"), added, where, err);
    b->unk = -1;
    size_t ulen = 0;
    const char *unk = vkg_json_string(vkg_json_get(model, "unk_token"), &ulen);
    if (st == VKG_OK && unk && (b->unk = tok_vocab_find(&b->vocab, unk, ulen)) < 0)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: model.unk_token \"%.*s\" is not in model.vocab", path,
                           ulen > 80 ? 80 : (int)ulen, unk);
    b->fuse_unk = vkg_json_bool(vkg_json_get(model, "fuse_unk"));
    b->byte_fallback = vkg_json_bool(vkg_json_get(model, "byte_fallback"));
    b->ignore_merges = vkg_json_bool(vkg_json_get(model, "ignore_merges"));
    if (st == VKG_OK) find_byte_tokens(b);
    if (st == VKG_OK) b->split_at_marker = marker_splits(b);
    size_t n = vkg_json_length(merges);
    tok_buf joined = {0};
    if (st == VKG_OK) st = merges_alloc(b, n, err);
    for (size_t i = 0; st == VKG_OK && i < n; i++) {
        const vkg_json *m = vkg_json_at(merges, i);
        snprintf(where, where_size, "%s: model.merges[%zu]", path, i);
        size_t l0 = 0, l1 = 0;
        const char *s = vkg_json_string(m, &l0), *a = NULL, *c = NULL;
        const char *space = s ? memchr(s, ' ', l0) : NULL;
        if (s && space && !memchr(space + 1, ' ', l0 - (size_t)(space + 1 - s))) {
            /* "LEFT RIGHT": exactly one space, as tokenizers requires */
            size_t k = (size_t)(space - s);
            a = s;
            c = space + 1;
            l1 = l0 - k - 1;
            l0 = k;
        } else if (vkg_json_type_of(m) == VKG_JSON_ARRAY && vkg_json_length(m) == 2) {
            a = vkg_json_string(vkg_json_at(m, 0), &l0);
            c = vkg_json_string(vkg_json_at(m, 1), &l1);
        }
        if (!a || !c || l0 == 0 || l1 == 0) {
            int shown = s ? (l0 > 80 ? 80 : (int)l0) : 0;
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: expected \"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"], found %s%s%.*s%s",
                               where, vkg_json_type_name(vkg_json_type_of(m)), s ? " \"" : "", shown, s ? s : "",
                               s ? "\"" : "");
            break;
        }
        st = add_merge(b, a, l0, c, l1, &joined, (int32_t)i, where, "model.vocab", err);
    }
    tok_buf_free(&joined);
    free(where);
    return st;
}

static vkg_status read_whole_file(const char *path, char **data, size_t *len, vkg_error *err) {
    const char *what;
    FILE *f = vkg_fopen_regular(path, NULL, &what);
    if (!f && what) return vkg_error_set(err, VKG_ERR_IO, "%s: is %s, not a regular file", path, what);
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    tok_buf b = {0};
    char chunk[1 << 16];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) tok_buf_put(&b, chunk, got);
    int failed = ferror(f);
    fclose(f);
    if (b.oom) {
        tok_buf_free(&b);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
    }
    if (failed) {
        tok_buf_free(&b);
        return vkg_error_set(err, VKG_ERR_IO, "%s: read error", path);
    }
    tok_buf_put(&b, "", 0);
    *data = b.data;
    *len = b.len;
    return VKG_OK;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* merges.txt: one merge a line, "LEFT RIGHT" in rank order, after an optional '#' header line;
 * split on runs of spaces and tabs, as the reference's split() does. */
static vkg_status load_merges(tok_bpe *b, const char *vocab_path, const char *path, vkg_error *err) {
    char *text = NULL;
    size_t len = 0;
    vkg_status st = read_whole_file(path, &text, &len, err);
    if (st != VKG_OK) return st;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    size_t where_size = strlen(path) + 32;
    char *where = malloc(where_size);
    tok_buf joined = {0};
    st = where ? merges_alloc(b, lines, err) : vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    const char *vocab_name = base_name(vocab_path);
    int32_t rank = 0;
    size_t line_no = 0;
    for (size_t pos = 0; pos < len && st == VKG_OK;) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t line_len = nl ? (size_t)(nl - line) : len - pos;
        pos += line_len + 1;
        line_no++;
        if (line_len > 0 && line[line_len - 1] == '\r') line_len--;
        if (line_no == 1 && line_len > 0 && line[0] == '#') continue; /* "#version: 0.2" */
        const char *part[3];
        size_t part_len[3];
        int parts = 0;
        for (size_t i = 0; i < line_len;) {
            while (i < line_len && (line[i] == ' ' || line[i] == '\t')) i++;
            if (i == line_len) break;
            size_t start = i;
            while (i < line_len && line[i] != ' ' && line[i] != '\t') i++;
            if (parts < 3) {
                part[parts] = line + start;
                part_len[parts] = i - start;
            }
            parts++;
        }
        if (parts == 0) continue; /* a blank line */
        int shown = line_len > 80 ? 80 : (int)line_len;
        snprintf(where, where_size, "%s:%zu", path, line_no);
        if (parts != 2)
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: expected two tokens separated by a space, found %d "
                               "(\"%.*s\")", where, parts, shown, line);
        else
            st = add_merge(b, part[0], part_len[0], part[1], part_len[1], &joined, rank++, where, vocab_name, err);
    }
    tok_buf_free(&joined);
    free(where);
    free(text);
    return st;
}

vkg_status tok_bpe_load_files(tok_bpe *b, const char *vocab_path, const char *merges_path, vkg_error *err) {
    vkg_json *vocab = NULL;
    vkg_status st = vkg_json_parse_file(vocab_path, &vocab, err);
    if (st == VKG_OK) st = build_vocab(&b->vocab, vocab, NULL, vocab_path, err);
    vkg_json_free(vocab);
    b->unk = -1;
    b->rounds = 1; /* OpenAI's encoder merges a pair everywhere before looking at new pairs */
    /* These files hold byte-level vocabularies only: every byte must have its token, or text
     * holding it would lose it. */
    for (unsigned x = 0; st == VKG_OK && x < 256; x++) {
        char spelled[4];
        uint32_t cp = tok_byte_char(x);
        size_t slen = cp < 0x80 ? 1 : 2;
        if (slen == 1) spelled[0] = (char)cp;
        else {
            spelled[0] = (char)(0xC0 | (cp >> 6));
            spelled[1] = (char)(0x80 | (cp & 0x3F));
        }
        if (tok_vocab_find(&b->vocab, spelled, slen) < 0)
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: no token for byte 0x%02X (spelled \"%.*s\"): not a byte-level "
                               "BPE vocabulary", vocab_path, x, (int)slen, spelled);
    }
    if (st == VKG_OK) st = load_merges(b, vocab_path, merges_path, err);
    return st;
}

/* ---- encoding one word ---------------------------------------------------------------------- */

/* Symbols of one word form a linked list; merging keeps the left one and unlinks the right. */
typedef struct bpe_symbol {
    int32_t id; /* -1 once merged into its left neighbour */
    int32_t prev, next;
} bpe_symbol;

/* A candidate merge of the symbol at left with its right neighbour, valid while both still hold
 * the ids recorded here. */
typedef struct bpe_pair {
    int32_t rank, left, left_id, right_id, result;
} bpe_pair;

/* The cache: word -> its ids, for the words of one encode call. */
typedef struct cache_slot {
    uint32_t key_off, key_len, ids_off, ids_len; /* key_len UINT32_MAX: empty */
} cache_slot;

struct tok_bpe_work {
    bpe_symbol *sym;
    bpe_pair *heap;  /* min-heap on (rank, left) */
    int32_t *merged; /* symbols merged in the current round (rounds only) */
    size_t cap, heap_len;
    cache_slot *cache;
    size_t cache_mask, cache_used;
    tok_buf keys;
    int32_t *cache_ids;
    size_t cache_ids_len, cache_ids_cap;
};

#define CACHE_SLOTS 65536 /* entries beyond half of this empty the cache */

tok_bpe_work *tok_bpe_work_new(void) { return calloc(1, sizeof(tok_bpe_work)); }

void tok_bpe_work_free(tok_bpe_work *w) {
    if (!w) return;
    free(w->sym);
    free(w->heap);
    free(w->merged);
    free(w->cache);
    tok_buf_free(&w->keys);
    free(w->cache_ids);
    free(w);
}

static int pair_before(const bpe_pair *a, const bpe_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push_pair(const tok_bpe *b, tok_bpe_work *w, int32_t left, int32_t right) {
    const tok_merge *m = merge_find(b, w->sym[left].id, w->sym[right].id);
    if (!m) return;
    size_t i = w->heap_len++;
    bpe_pair p = {m->rank, left, w->sym[left].id, w->sym[right].id, m->result};
    while (i > 0 && pair_before(&p, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = p;
}

static bpe_pair heap_pop(tok_bpe_work *w) {
    bpe_pair top = w->heap[0], last = w->heap[--w->heap_len];
    size_t i = 0, n = w->heap_len;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!pair_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

static int work_reserve(tok_bpe_work *w, size_t m) {
    if (m <= w->cap) return 1;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < m) cap *= 2;
    free(w->sym);
    free(w->heap);
    free(w->merged);
    w->sym = malloc(cap * sizeof *w->sym);
    w->heap = malloc(3 * cap * sizeof *w->heap); /* m - 1 pairs at first, at most 2 more per merge */
    w->merged = malloc(cap * sizeof *w->merged);
    w->cap = w->sym && w->heap && w->merged ? cap : 0;
    return w->cap != 0;
}

/* Merges the symbols sym[0..m) in place; returns the first symbol (or -1 when m is 0). */
static void merge_all(const tok_bpe *b, tok_bpe_work *w, size_t m) {
    bpe_symbol *sym = w->sym;
    w->heap_len = 0;
    for (size_t i = 0; i + 1 < m; i++) heap_push_pair(b, w, (int32_t)i, (int32_t)i + 1);
    while (w->heap_len > 0) {
        int32_t rank = w->heap[0].rank;
        size_t n_merged = 0;
        /* With rounds, every pair of this rank is merged before new pairs are considered (OpenAI's
         * encoder); otherwise new pairs join the heap at once (tokenizers). */
        while (w->heap_len > 0 && w->heap[0].rank == rank) {
            bpe_pair p = heap_pop(w);
            bpe_symbol *left = &sym[p.left];
            if (left->id != p.left_id || left->next < 0 || sym[left->next].id != p.right_id) continue; /* stale */
            bpe_symbol *right = &sym[left->next];
            left->id = p.result;
            left->next = right->next;
            if (right->next >= 0) sym[right->next].prev = p.left;
            right->id = -1;
            if (!b->rounds) {
                if (left->prev >= 0) heap_push_pair(b, w, left->prev, p.left);
                if (left->next >= 0) heap_push_pair(b, w, p.left, left->next);
                break;
            }
            w->merged[n_merged++] = p.left;
        }
        for (size_t k = 0; k < n_merged; k++) {
            int32_t s = w->merged[k];
            if (sym[s].prev >= 0) heap_push_pair(b, w, sym[s].prev, s);
            if (sym[s].next >= 0) heap_push_pair(b, w, s, sym[s].next);
        }
    }
}

static int push_id(int32_t **ids, size_t *n, size_t *cap, int32_t id) {
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        int32_t *bigger = realloc(*ids, c * sizeof *bigger);
        if (!bigger) return 0;
        *ids = bigger;
        *cap = c;
    }
    (*ids)[(*n)++] = id;
    return 1;
}

/* Encodes word without the cache, appending to ids. */
static int encode_word(const tok_bpe *b, tok_bpe_work *w, const char *word, size_t len, int32_t **ids, size_t *n,
                       size_t *cap) {
    if (b->ignore_merges) {
        int32_t id = tok_vocab_find(&b->vocab, word, len);
        if (id >= 0) return push_id(ids, n, cap, id);
    }
    if (!work_reserve(w, len)) return 0; /* at most one symbol a byte */
    size_t m = 0;
    int last_unk = 0;
    for (size_t i = 0; i < len;) {
        size_t k = tok_utf8_len((unsigned char)word[i]);
        if (k > len - i) k = len - i;
        int32_t id = tok_vocab_find(&b->vocab, word + i, k);
        if (id >= 0) {
            w->sym[m++].id = id;
            last_unk = 0;
        } else {
            int all = b->byte_fallback;
            for (size_t j = 0; all && j < k; j++) all = b->byte_ids[(unsigned char)word[i + j]] >= 0;
            if (all) {
                for (size_t j = 0; j < k; j++) w->sym[m++].id = b->byte_ids[(unsigned char)word[i + j]];
                last_unk = 0;
            } else if (b->unk >= 0) {
                if (!(b->fuse_unk && last_unk)) w->sym[m++].id = b->unk;
                last_unk = 1;
            } /* no unk_token: the character is dropped, as tokenizers drops it */
        }
        i += k;
    }
    for (size_t i = 0; i < m; i++) {
        w->sym[i].prev = (int32_t)i - 1;
        w->sym[i].next = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    if (m > 1) merge_all(b, w, m);
    for (int32_t s = m ? 0 : -1; s >= 0; s = w->sym[s].next) /* symbol 0 is never merged away */
        if (!push_id(ids, n, cap, w->sym[s].id)) return 0;
    return 1;
}

static size_t cache_hash(const char *s, size_t len) { return (size_t)str_hash(s, len); }

static int cached_word(const tok_bpe *b, tok_bpe_work *w, const char *word, size_t len, int32_t **ids, size_t *n,
                       size_t *cap);

int tok_bpe_word(const tok_bpe *b, tok_bpe_work *w, const char *word, size_t len, int32_t **ids, size_t *n,
                 size_t *cap) {
    if (!b->split_at_marker || len <= 64) return cached_word(b, w, word, len, ids, n, cap);
    size_t start = 0;
    /* A boundary: U+2581 at k after a character that is not U+2581 (its lead byte 0xE2 is never
     * inside another character, so a byte match is a character). */
    for (size_t k = 1; k + 3 <= len; k++)
        if (!memcmp(word + k, MARKER, 3) && !(k >= 3 && !memcmp(word + k - 3, MARKER, 3))) {
            if (!cached_word(b, w, word + start, k - start, ids, n, cap)) return 0;
            start = k;
            k += 2;
        }
    return cached_word(b, w, word + start, len - start, ids, n, cap);
}

static int cached_word(const tok_bpe *b, tok_bpe_work *w, const char *word, size_t len, int32_t **ids, size_t *n,
                       size_t *cap) {
    if (len == 0) return 1;
    if (len > 256) return encode_word(b, w, word, len, ids, n, cap); /* long words are rarely repeated */
    if (!w->cache) {
        w->cache = malloc(CACHE_SLOTS * sizeof *w->cache);
        if (!w->cache) return encode_word(b, w, word, len, ids, n, cap);
        w->cache_mask = CACHE_SLOTS - 1;
        for (size_t i = 0; i < CACHE_SLOTS; i++) w->cache[i].key_len = UINT32_MAX;
    }
    size_t i = cache_hash(word, len) & w->cache_mask;
    for (;; i = (i + 1) & w->cache_mask) {
        const cache_slot *c = &w->cache[i];
        if (c->key_len == UINT32_MAX) break;
        if (c->key_len == len && !memcmp(w->keys.data + c->key_off, word, len)) {
            for (uint32_t k = 0; k < c->ids_len; k++)
                if (!push_id(ids, n, cap, w->cache_ids[c->ids_off + k])) return 0;
            return 1;
        }
    }
    size_t before = *n;
    if (!encode_word(b, w, word, len, ids, n, cap)) return 0;
    if (w->cache_used >= CACHE_SLOTS / 2) { /* full: start again rather than probe long chains */
        for (size_t k = 0; k < CACHE_SLOTS; k++) w->cache[k].key_len = UINT32_MAX;
        w->cache_used = 0;
        w->keys.len = 0;
        w->cache_ids_len = 0;
        i = cache_hash(word, len) & w->cache_mask;
    }
    size_t count = *n - before, key_off = w->keys.len, ids_off = w->cache_ids_len;
    tok_buf_put(&w->keys, word, len);
    for (size_t k = 0; k < count; k++)
        if (!push_id(&w->cache_ids, &w->cache_ids_len, &w->cache_ids_cap, (*ids)[before + k])) return 1;
    if (w->keys.oom || w->keys.len > UINT32_MAX || w->cache_ids_len > UINT32_MAX) return 1; /* not cached */
    w->cache[i] = (cache_slot){(uint32_t)key_off, (uint32_t)len, (uint32_t)ids_off, (uint32_t)count};
    w->cache_used++;
    return 1;
}
