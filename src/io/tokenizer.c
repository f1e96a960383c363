/* GPT-2's byte-level BPE tokenizer: loading the vocabulary and merges, encoding, decoding.
 * The behaviour it matches, and why, is described in tokenizer.h. */
#include "io/tokenizer.h"

#include "base/error.h"
#include "base/file_open.h"
#include "base/json.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* \s as JavaScript defines it (the reference runs the pattern as a /u JavaScript regex): tab, LF,
 * VT, FF, CR, BOM, the two Unicode line separators and every Zs space.  Spelled out rather than
 * left to PCRE2's \s, which differs (it has U+0085 and U+180E, lacks U+FEFF). */
#define JS_SPACE "\\t\\n\\x{0B}\\f\\r\\x{FEFF}\\x{2028}\\x{2029}\\p{Zs}"
static const char gpt2_split_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" JS_SPACE "\\p{L}\\p{N}]+"
    "|[" JS_SPACE "]+(?![^" JS_SPACE "])|[" JS_SPACE "]+";

/* The byte alphabet: 188 bytes that are printable Latin-1 stand for themselves, the other 68 are
 * given U+0100.. in increasing byte order, so every byte has a visible, non-space spelling. */
#define ALPHABET_END 0x144 /* one past the highest code point the alphabet uses */

static int byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

/* byte_cp[b]: the code point spelling byte b; cp_byte[cp]: the byte a code point spells, or -1. */
static void alphabet_tables(uint32_t byte_cp[256], int16_t cp_byte[ALPHABET_END]) {
    uint32_t next_extra = 0x100;
    for (uint32_t cp = 0; cp < ALPHABET_END; cp++) cp_byte[cp] = -1;
    for (unsigned b = 0; b < 256; b++) {
        byte_cp[b] = byte_is_printable(b) ? b : next_extra++;
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

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

/* ----------------------------------------------------------------------------------------------
 * The tokenizer
 * -------------------------------------------------------------------------------------------- */

/* A merge: the pair (left id, right id) packed in key, its rank and the token it makes. */
typedef struct merge_slot {
    uint64_t key;
    int32_t rank; /* -1: empty slot */
    int32_t result;
} merge_slot;

struct vkg_tokenizer {
    int32_t vocab_size;
    int32_t eot;
    int32_t byte_token[256];  /* the single-byte token of each byte: every piece starts as these */
    uint32_t *token_offset;   /* id -> where its raw bytes start in token_bytes */
    uint32_t *token_length;
    char *token_bytes;
    merge_slot *merges;       /* open addressing, a power-of-two number of slots */
    size_t merge_mask;
    pcre2_code *split;        /* GPT-2's pre-tokenization pattern, compiled once */
};

static uint64_t pair_key(int32_t left, int32_t right) {
    return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

static size_t pair_hash(uint64_t key, size_t mask) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 29) & mask;
}

static const merge_slot *merge_find(const vkg_tokenizer *t, int32_t left, int32_t right) {
    uint64_t key = pair_key(left, right);
    for (size_t i = pair_hash(key, t->merge_mask);; i = (i + 1) & t->merge_mask) {
        const merge_slot *slot = &t->merges[i];
        if (slot->rank < 0) return NULL;
        if (slot->key == key) return slot;
    }
}

/* A pair listed twice keeps the later rank, as the reference's dictionary does. */
static void merge_insert(vkg_tokenizer *t, int32_t left, int32_t right, int32_t rank, int32_t result) {
    uint64_t key = pair_key(left, right);
    size_t i = pair_hash(key, t->merge_mask);
    while (t->merges[i].rank >= 0 && t->merges[i].key != key) i = (i + 1) & t->merge_mask;
    t->merges[i] = (merge_slot){key, rank, result};
}

void vkg_tokenizer_free(vkg_tokenizer *t) {
    if (!t) return;
    free(t->token_offset);
    free(t->token_length);
    free(t->token_bytes);
    free(t->merges);
    pcre2_code_free(t->split);
    free(t);
}

int32_t vkg_tokenizer_vocab_size(const vkg_tokenizer *t) { return t ? t->vocab_size : 0; }
int32_t vkg_tokenizer_eot(const vkg_tokenizer *t) { return t ? t->eot : -1; }

const char *vkg_tokenizer_token_bytes(const vkg_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->vocab_size) return NULL;
    if (len) *len = t->token_length[id];
    return t->token_bytes + t->token_offset[id];
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

static vkg_status read_whole_file(const char *path, char **data, size_t *len, vkg_error *err) {
    const char *what;
    FILE *f = vkg_fopen_regular(path, NULL, &what);
    if (!f && what) return vkg_error_set(err, VKG_ERR_IO, "%s: is %s, not a regular file", path, what);
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, used = 0;
    char *buf = malloc(cap);
    while (buf) {
        used += fread(buf + used, 1, cap - used, f);
        if (used < cap) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) { free(buf); buf = NULL; break; }
        buf = bigger;
        cap *= 2;
    }
    int failed = buf && ferror(f);
    fclose(f);
    if (!buf) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
    if (failed) {
        free(buf);
        return vkg_error_set(err, VKG_ERR_IO, "%s: read error", path);
    }
    *data = buf;
    *len = used;
    return VKG_OK;
}

/* Stores token id's raw bytes: back from the byte alphabet; a character outside it (a token
 * added by hand) stands for its own UTF-8 bytes.  The JSON parser has checked it is UTF-8. */
static void store_token(vkg_tokenizer *t, int32_t id, const char *key, size_t klen, const int16_t *cp_byte,
                        uint32_t *used) {
    t->token_offset[id] = *used;
    const unsigned char *s = (const unsigned char *)key;
    for (size_t k = 0; k < klen;) {
        size_t seq = s[k] < 0x80 ? 1 : s[k] < 0xE0 ? 2 : s[k] < 0xF0 ? 3 : 4;
        uint32_t cp = seq == 1 ? s[k] : (uint32_t)(s[k] & (0x3F >> (seq - 1)));
        for (size_t j = 1; j < seq && k + j < klen; j++) cp = (cp << 6) | (s[k + j] & 0x3F);
        if (cp < ALPHABET_END && cp_byte[cp] >= 0) t->token_bytes[(*used)++] = (char)cp_byte[cp];
        else for (size_t j = 0; j < seq && k + j < klen; j++) t->token_bytes[(*used)++] = (char)s[k + j];
        k += seq;
    }
    t->token_length[id] = *used - t->token_offset[id];
}

/* tokenizer.json's added_tokens: each {"id": N, "content": "..."}.  One the vocabulary already
 * holds must have its id there; the others are new tokens after it.  Counts the new ones and
 * their bytes. */
static vkg_status check_added(const vkg_json *vocab, const vkg_json *added, const char *where, size_t *n_new,
                              size_t *new_bytes, vkg_error *err) {
    *n_new = *new_bytes = 0;
    if (vkg_json_type_of(added) == VKG_JSON_NULL) return VKG_OK;
    if (vkg_json_type_of(added) != VKG_JSON_ARRAY)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: added_tokens is %s, expected an array", where,
                             vkg_json_type_name(vkg_json_type_of(added)));
    for (size_t i = 0; i < vkg_json_length(added); i++) {
        const vkg_json *a = vkg_json_at(added, i), *id = vkg_json_get(a, "id");
        size_t clen = 0;
        const char *content = vkg_json_string(vkg_json_get(a, "content"), &clen);
        if (vkg_json_type_of(a) != VKG_JSON_OBJECT || vkg_json_type_of(id) != VKG_JSON_NUMBER || !content)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: added_tokens[%zu] is not {\"id\": number, \"content\": "
                                 "string}", where, i);
        const vkg_json *in_vocab = vkg_json_get_n(vocab, content, clen);
        int shown = clen > 80 ? 80 : (int)clen;
        if (in_vocab && vkg_json_number(in_vocab) != vkg_json_number(id))
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: added_tokens[%zu] gives \"%.*s\" id %.17g, but model.vocab "
                                 "gives it %.17g", where, i, shown, content, vkg_json_number(id),
                                 vkg_json_number(in_vocab));
        if (!in_vocab) {
            (*n_new)++;
            *new_bytes += clen;
        }
    }
    return VKG_OK;
}

/* Fills the id -> raw bytes table, the byte tokens and eot from the token -> id object vocab
 * and (tokenizer.json only, else NULL) added_tokens.  where starts each message. */
static vkg_status build_vocab(vkg_tokenizer *t, const vkg_json *vocab, const vkg_json *added, const char *where,
                              vkg_error *err) {
    if (vkg_json_type_of(vocab) != VKG_JSON_OBJECT)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: expected an object mapping each token to its id, found %s",
                             where, vkg_json_type_name(vkg_json_type_of(vocab)));
    size_t n_vocab = vkg_json_length(vocab), key_bytes = 0, n_new = 0, new_bytes = 0;
    if (n_vocab == 0) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: the vocabulary is empty", where);
    vkg_status st = check_added(vocab, added, where, &n_new, &new_bytes, err);
    if (st != VKG_OK) return st;
    size_t n = n_vocab + n_new;
    if (n > INT32_MAX) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: too many tokens (%zu)", where, n);
    for (size_t i = 0; i < n_vocab; i++) {
        size_t klen;
        vkg_json_key_at(vocab, i, &klen);
        key_bytes += klen;
    }
    key_bytes += new_bytes;
    if (key_bytes > UINT32_MAX) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tokens too long", where);
    t->vocab_size = (int32_t)n;
    t->token_offset = malloc(n * sizeof *t->token_offset);
    t->token_length = malloc(n * sizeof *t->token_length);
    t->token_bytes = malloc(key_bytes + 1);
    if (!t->token_offset || !t->token_length || !t->token_bytes)
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory loading %s", where);
    for (size_t i = 0; i < n; i++) t->token_length[i] = UINT32_MAX; /* not yet seen */

    uint32_t byte_cp[256];
    int16_t cp_byte[ALPHABET_END];
    alphabet_tables(byte_cp, cp_byte);
    uint32_t used = 0;
    /* The vocabulary's entries, then the added tokens it lacks: ids must be 0..N-1 over both. */
    for (size_t i = 0; i < n_vocab + vkg_json_length(added); i++) {
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
        if (t->token_length[id] != UINT32_MAX)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: %s (token \"%.*s\"): id %d is already used", where,
                                 entry, shown, key, (int)id);
        store_token(t, id, key, klen, cp_byte, &used);
    }
    t->token_bytes[used] = '\0';

    for (unsigned b = 0; b < 256; b++) {
        char spelled[4];
        size_t slen = vkg_utf8_encode(byte_cp[b], spelled);
        const vkg_json *id = vkg_json_get_n(vocab, spelled, slen);
        if (!id)
            return vkg_error_set(err, VKG_ERR_FORMAT,
                                 "%s: no token for byte 0x%02X (spelled \"%.*s\"): not a byte-level BPE "
                                 "vocabulary", where, b, (int)slen, spelled);
        t->byte_token[b] = (int32_t)vkg_json_number(id);
    }
    t->eot = -1;
    const vkg_json *eot = vkg_json_get(vocab, "<|endoftext|>");
    if (eot) t->eot = (int32_t)vkg_json_number(eot);
    for (size_t i = 0; !eot && i < vkg_json_length(added); i++) {
        const vkg_json *a = vkg_json_at(added, i);
        const char *content = vkg_json_string(vkg_json_get(a, "content"), NULL);
        if (strcmp(content, "<|endoftext|>") == 0) t->eot = (int32_t)vkg_json_number(vkg_json_get(a, "id"));
    }
    return VKG_OK;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static vkg_status merges_alloc(vkg_tokenizer *t, size_t count, vkg_error *err) {
    size_t slots = 16;
    while (slots < 2 * count) slots *= 2;
    t->merges = malloc(slots * sizeof *t->merges);
    if (!t->merges) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for %zu merges", count);
    t->merge_mask = slots - 1;
    for (size_t i = 0; i < slots; i++) t->merges[i].rank = -1;
    return VKG_OK;
}

/* One merge of rank rank, LEFT + RIGHT, both and their join looked up in vocab.  joined has room
 * for both.  where ("merges.txt:12") starts the messages, which call the vocabulary vocab_name. */
static vkg_status add_merge(vkg_tokenizer *t, const vkg_json *vocab, const char *left, size_t left_len,
                            const char *right, size_t right_len, char *joined, int32_t rank, const char *where,
                            const char *vocab_name, vkg_error *err) {
    const char *part[2] = {left, right};
    size_t part_len[2] = {left_len, right_len};
    const vkg_json *ids[3];
    for (int k = 0; k < 2; k++) {
        ids[k] = vkg_json_get_n(vocab, part[k], part_len[k]);
        if (!ids[k])
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: token \"%.*s\" is not in %s", where, (int)part_len[k],
                                 part[k], vocab_name);
    }
    memcpy(joined, left, left_len);
    memcpy(joined + left_len, right, right_len);
    ids[2] = vkg_json_get_n(vocab, joined, left_len + right_len);
    if (!ids[2])
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: merging \"%.*s\" and \"%.*s\" makes a token that is not in %s",
                             where, (int)left_len, left, (int)right_len, right, vocab_name);
    merge_insert(t, (int32_t)vkg_json_number(ids[0]), (int32_t)vkg_json_number(ids[1]), rank,
                 (int32_t)vkg_json_number(ids[2]));
    return VKG_OK;
}

/* Reads the merges, one "LEFT RIGHT" a line in rank order, after an optional '#' header line. */
static vkg_status load_merges(vkg_tokenizer *t, const vkg_json *vocab, const char *vocab_path,
                              const char *path, vkg_error *err) {
    char *text = NULL;
    size_t len = 0;
    vkg_status st = read_whole_file(path, &text, &len, err);
    if (st != VKG_OK) return st;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    char *joined = malloc(len + 1); /* LEFT and RIGHT come from one line: never longer */
    size_t where_size = strlen(path) + 32;
    char *where = malloc(where_size);
    st = joined && where ? merges_alloc(t, lines, err) : vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");

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
        /* Split on runs of spaces and tabs, as the reference's split() does. */
        const char *part[3];
        size_t part_len[3];
        int parts = 0;
        for (size_t i = 0; i < line_len;) {
            while (i < line_len && (line[i] == ' ' || line[i] == '\t')) i++;
            if (i == line_len) break;
            size_t start = i;
            while (i < line_len && line[i] != ' ' && line[i] != '\t') i++;
            if (parts < 3) { part[parts] = line + start; part_len[parts] = i - start; }
            parts++;
        }
        if (parts == 0) continue; /* a blank line */
        int shown = line_len > 80 ? 80 : (int)line_len;
        snprintf(where, where_size, "%s:%zu", path, line_no);
        if (parts != 2)
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: expected two tokens separated by a space, found %d "
                               "(\"%.*s\")", where, parts, shown, line);
        else
            st = add_merge(t, vocab, part[0], part_len[0], part[1], part_len[1], joined, rank++, where, vocab_name,
                           err);
    }
    free(where);
    free(joined);
    free(text);
    return st;
}

static int nonempty_string(const vkg_json *v) {
    size_t len = 0;
    return vkg_json_string(v, &len) && len > 0;
}

/* A setting of tokenizer.json that changes the ids, checked to be GPT-2's: names the setting. */
static vkg_status refuse_setting(const char *path, const char *what, const vkg_json *v, vkg_error *err) {
    const char *type = vkg_json_string(vkg_json_get(v, "type"), NULL);
    return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: %s%s%s%s is not supported: vkgraph reads GPT-2's byte-level "
                         "BPE tokenizer.json only", path, what, type ? " \"" : "", type ? type : "", type ? "\"" : "");
}

/* tokenizer.json as Hugging Face tokenizers (and transformers' save_pretrained) writes it for
 * GPT-2: model {type "BPE", vocab {token: id}, merges ["a b", ...] or [["a", "b"], ...]},
 * added_tokens, a ByteLevel pre-tokenizer without a prefix space, no normalizer. */
static vkg_status load_tokenizer_json(vkg_tokenizer *t, const char *path, vkg_error *err) {
    vkg_json *root = NULL;
    vkg_status st = vkg_json_parse_file(path, &root, err);
    if (st != VKG_OK) return st;
    const vkg_json *model = vkg_json_get(root, "model"), *type = vkg_json_get(model, "type");
    const vkg_json *pre = vkg_json_get(root, "pre_tokenizer"), *norm = vkg_json_get(root, "normalizer");
    const vkg_json *merges = vkg_json_get(model, "merges");
    const char *type_name = vkg_json_string(type, NULL);
    if (vkg_json_type_of(root) != VKG_JSON_OBJECT)
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
        st = vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: model.type is \"%s\": vkgraph reads GPT-2's byte-level "
                           "BPE (\"BPE\") only", path, type_name);
    else if (vkg_json_type_of(norm) != VKG_JSON_NULL)
        st = refuse_setting(path, "normalizer", norm, err);
    else if (vkg_json_type_of(pre) != VKG_JSON_NULL &&
             (!vkg_json_string(vkg_json_get(pre, "type"), NULL) ||
              strcmp(vkg_json_string(vkg_json_get(pre, "type"), NULL), "ByteLevel") != 0))
        st = refuse_setting(path, "pre_tokenizer", pre, err);
    else if (vkg_json_bool(vkg_json_get(pre, "add_prefix_space")))
        st = refuse_setting(path, "pre_tokenizer.add_prefix_space true", NULL, err);
    else if (vkg_json_bool(vkg_json_get(model, "ignore_merges")))
        st = refuse_setting(path, "model.ignore_merges true", NULL, err);
    else if (nonempty_string(vkg_json_get(model, "continuing_subword_prefix")) ||
             nonempty_string(vkg_json_get(model, "end_of_word_suffix")))
        st = refuse_setting(path, "a model.continuing_subword_prefix or model.end_of_word_suffix", NULL, err);
    else if (!vkg_json_get(model, "vocab"))
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: model has no \"vocab\"", path);
    else if (vkg_json_type_of(merges) != VKG_JSON_ARRAY)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: model.merges is %s, expected an array", path,
                           merges ? vkg_json_type_name(vkg_json_type_of(merges)) : "missing");
    size_t where_size = strlen(path) + 48;
    char *where = malloc(where_size);
    if (st == VKG_OK && !where) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    const vkg_json *vocab = vkg_json_get(model, "vocab");
    if (st == VKG_OK) {
        snprintf(where, where_size, "%s: model.vocab", path);
        st = build_vocab(t, vocab, vkg_json_get(root, "added_tokens"), where, err);
    }
    size_t n = vkg_json_length(merges), longest = 0; /* the longest LEFT + RIGHT, for joining them */
    for (size_t i = 0; i < n; i++) {
        const vkg_json *m = vkg_json_at(merges, i);
        size_t l0 = 0, l1 = 0;
        if (!vkg_json_string(m, &l0)) {
            vkg_json_string(vkg_json_at(m, 0), &l0);
            vkg_json_string(vkg_json_at(m, 1), &l1);
        }
        if (l0 + l1 > longest) longest = l0 + l1;
    }
    char *joined = st == VKG_OK ? malloc(longest + 1) : NULL;
    if (st == VKG_OK) st = joined ? merges_alloc(t, n, err) : vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; st == VKG_OK && i < n; i++) {
        const vkg_json *m = vkg_json_at(merges, i);
        snprintf(where, where_size, "%s: model.merges[%zu]", path, i);
        size_t l0 = 0, l1 = 0;
        const char *s = vkg_json_string(m, &l0), *a = NULL, *b = NULL;
        const char *space = s ? memchr(s, ' ', l0) : NULL;
        if (s && space && !memchr(space + 1, ' ', l0 - (size_t)(space + 1 - s))) {
            /* "LEFT RIGHT": exactly one space, as tokenizers requires */
            size_t k = (size_t)(space - s);
            a = s;
            b = space + 1;
            l1 = l0 - k - 1;
            l0 = k;
        } else if (vkg_json_type_of(m) == VKG_JSON_ARRAY && vkg_json_length(m) == 2) {
            a = vkg_json_string(vkg_json_at(m, 0), &l0);
            b = vkg_json_string(vkg_json_at(m, 1), &l1);
        }
        if (!a || !b || l0 == 0 || l1 == 0) {
            int shown = s ? (l0 > 80 ? 80 : (int)l0) : 0;
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: expected \"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"], found %s%s%.*s%s",
                               where, vkg_json_type_name(vkg_json_type_of(m)), s ? " \"" : "", shown, s ? s : "",
                               s ? "\"" : "");
            break;
        }
        st = add_merge(t, vocab, a, l0, b, l1, joined, (int32_t)i, where, "model.vocab", err);
    }
    free(joined);
    free(where);
    vkg_json_free(root);
    return st;
}

static vkg_status compile_split_pattern(vkg_tokenizer *t, vkg_error *err) {
    int code;
    PCRE2_SIZE where;
    t->split = pcre2_compile((PCRE2_SPTR)gpt2_split_pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code,
                             &where, NULL);
    if (!t->split) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(code, message, sizeof message);
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "PCRE2 cannot compile GPT-2's split pattern (at offset "
                             "%zu): %s; it needs a PCRE2 built with Unicode support", (size_t)where,
                             (const char *)message);
    }
    /* JIT makes matching several times faster; where it is unavailable the interpreter gives
     * the same matches, so a failure here is not an error. */
    (void)pcre2_jit_compile(t->split, PCRE2_JIT_COMPLETE);
    return VKG_OK;
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

vkg_status vkg_tokenizer_load(const char *dir, vkg_tokenizer **out, vkg_error *err) {
    if (out) *out = NULL;
    if (!dir || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_tokenizer_load: NULL argument");
    /* tokenizer.json first, as transformers' AutoTokenizer (the fast tokenizer) reads it when it
     * is there; then Hugging Face's pair, then OpenAI's; a half pair is reported as such. */
    size_t json_size = strlen(dir) + sizeof "/tokenizer.json";
    char *json_path = malloc(json_size);
    if (!json_path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(json_path, json_size, "%s/tokenizer.json", dir);
    if (is_present(json_path)) {
        vkg_tokenizer *t = calloc(1, sizeof *t);
        vkg_status st = t ? load_tokenizer_json(t, json_path, err) : vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        if (st == VKG_OK) st = compile_split_pattern(t, err);
        free(json_path);
        if (st != VKG_OK) {
            vkg_tokenizer_free(t);
            return st;
        }
        *out = t;
        return VKG_OK;
    }
    free(json_path);
    static const char *const names[2][2] = {{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}};
    size_t dlen = strlen(dir);
    char *paths[2][2];
    int found[2][2], pair = -1;
    for (int p = 0; p < 2; p++)
        for (int f = 0; f < 2; f++) {
            paths[p][f] = malloc(dlen + strlen(names[p][f]) + 2);
            if (!paths[p][f]) found[p][f] = 0;
            else {
                sprintf(paths[p][f], "%s/%s", dir, names[p][f]);
                found[p][f] = is_present(paths[p][f]);
            }
        }
    vkg_status st = VKG_OK;
    if (!paths[0][0] || !paths[0][1] || !paths[1][0] || !paths[1][1])
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    else if (found[0][0] || found[0][1]) pair = 0;
    else if (found[1][0] || found[1][1]) pair = 1;
    else
        st = vkg_error_set(err, VKG_ERR_IO, "no tokenizer in %s: looked for tokenizer.json, vocab.json + "
                           "merges.txt and encoder.json + vocab.bpe", dir);
    if (st == VKG_OK && !(found[pair][0] && found[pair][1])) {
        int missing = found[pair][0] ? 1 : 0;
        st = vkg_error_set(err, VKG_ERR_IO, "incomplete tokenizer in %s: %s is there but %s is missing", dir,
                           names[pair][1 - missing], names[pair][missing]);
    }

    vkg_tokenizer *t = NULL;
    vkg_json *vocab = NULL;
    if (st == VKG_OK) {
        t = calloc(1, sizeof *t);
        if (!t) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (st == VKG_OK) st = vkg_json_parse_file(paths[pair][0], &vocab, err);
    if (st == VKG_OK) st = build_vocab(t, vocab, NULL, paths[pair][0], err);
    if (st == VKG_OK) st = load_merges(t, vocab, paths[pair][0], paths[pair][1], err);
    if (st == VKG_OK) st = compile_split_pattern(t, err);
    vkg_json_free(vocab);
    for (int p = 0; p < 2; p++)
        for (int f = 0; f < 2; f++) free(paths[p][f]);
    if (st != VKG_OK) {
        vkg_tokenizer_free(t);
        return st;
    }
    *out = t;
    return VKG_OK;
}

/* ----------------------------------------------------------------------------------------------
 * Encoding: split into pieces, then BPE on each piece
 * -------------------------------------------------------------------------------------------- */

/* Symbols of one piece form a linked list; merging keeps the left one and unlinks the right. */
typedef struct bpe_symbol {
    int32_t id; /* -1 once merged into its left neighbour */
    int32_t prev, next;
} bpe_symbol;

/* A candidate merge of the symbol at left with its right neighbour, valid while both still hold
 * the ids recorded here. */
typedef struct bpe_pair {
    int32_t rank, left, left_id, right_id, result;
} bpe_pair;

typedef struct bpe_work {
    bpe_symbol *sym;
    bpe_pair *heap;   /* min-heap on (rank, left): lowest rank first, then leftmost */
    int32_t *merged;  /* symbols merged in the current round */
    size_t cap;       /* symbols the buffers hold; the heap holds 3 * cap */
    size_t heap_len;
} bpe_work;

static int pair_before(const bpe_pair *a, const bpe_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push_pair(const vkg_tokenizer *t, bpe_work *w, int32_t left, int32_t right) {
    const merge_slot *m = merge_find(t, w->sym[left].id, w->sym[right].id);
    if (!m) return;
    size_t i = w->heap_len++;
    bpe_pair p = {m->rank, left, w->sym[left].id, w->sym[right].id, m->result};
    while (i > 0 && pair_before(&p, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = p;
}

static bpe_pair heap_pop(bpe_work *w) {
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

/* BPE on one piece of m bytes; writes its ids to out and returns how many.
 *
 * The reference, in each round, takes the lowest-ranked pair present and merges every occurrence
 * of it, left to right, before looking at any pair those merges create.  Rounds are kept here
 * the same way: all heap entries of the lowest rank are applied first, and only then are the new
 * neighbours' pairs pushed.  That gives the reference's result even for merge lists in which a
 * new pair can outrank the merge that made it. */
static size_t bpe_piece(const vkg_tokenizer *t, const unsigned char *bytes, size_t m, bpe_work *w, int32_t *out) {
    bpe_symbol *sym = w->sym;
    for (size_t i = 0; i < m; i++)
        sym[i] = (bpe_symbol){t->byte_token[bytes[i]], (int32_t)i - 1, i + 1 < m ? (int32_t)i + 1 : -1};
    w->heap_len = 0;
    for (size_t i = 0; i + 1 < m; i++) heap_push_pair(t, w, (int32_t)i, (int32_t)i + 1);
    while (w->heap_len > 0) {
        int32_t rank = w->heap[0].rank;
        size_t n_merged = 0;
        while (w->heap_len > 0 && w->heap[0].rank == rank) {
            bpe_pair p = heap_pop(w);
            bpe_symbol *left = &sym[p.left];
            if (left->id != p.left_id || left->next < 0 || sym[left->next].id != p.right_id) continue; /* stale */
            bpe_symbol *right = &sym[left->next];
            left->id = p.result;
            left->next = right->next;
            if (right->next >= 0) sym[right->next].prev = p.left;
            right->id = -1;
            w->merged[n_merged++] = p.left;
        }
        for (size_t k = 0; k < n_merged; k++) {
            int32_t s = w->merged[k];
            if (sym[s].prev >= 0) heap_push_pair(t, w, sym[s].prev, s);
            if (sym[s].next >= 0) heap_push_pair(t, w, s, sym[s].next);
        }
    }
    size_t n = 0;
    for (int32_t s = 0; s >= 0; s = sym[s].next) out[n++] = sym[s].id; /* symbol 0 is never merged away */
    return n;
}

static int bpe_work_reserve(bpe_work *w, size_t m) {
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

vkg_status vkg_tokenizer_encode(const vkg_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
                                vkg_error *err) {
    if (ids) *ids = NULL;
    if (n) *n = 0;
    if (!t || !ids || !n || (!text && len > 0))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_tokenizer_encode: NULL argument");
    if (len > (size_t)INT32_MAX) /* symbols are indexed with int32_t */
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "text of %zu bytes is too long to encode", len);
    const unsigned char *bytes = (const unsigned char *)text;
    size_t bad;
    char why[128];
    if (!utf8_validate(bytes, len, &bad, why, sizeof why))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "invalid UTF-8 at byte %zu: %s", bad, why);
    if (len == 0) return VKG_OK;

    int32_t *out = malloc(len * sizeof *out); /* every token holds at least one byte */
    pcre2_match_data *match = pcre2_match_data_create_from_pattern(t->split, NULL);
    bpe_work work = {0};
    vkg_status st = VKG_OK;
    if (!out || !match) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory encoding %zu bytes", len);
    size_t count = 0;
    for (size_t offset = 0; st == VKG_OK && offset < len;) {
        /* The text was validated above: PCRE2 would otherwise re-check it all on every call. */
        int rc = pcre2_match(t->split, (PCRE2_SPTR)bytes, len, offset, PCRE2_NO_UTF_CHECK, match, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break; /* cannot happen: every character matches some branch */
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(match);
        if (rc < 0 || ov[1] <= ov[0]) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(rc, message, sizeof message);
            st = vkg_error_set(err, rc == PCRE2_ERROR_NOMEMORY ? VKG_ERR_OUT_OF_MEMORY : VKG_ERR_INVALID_ARGUMENT,
                               "splitting the text failed at byte %zu: %s", offset,
                               rc < 0 ? (const char *)message : "empty match");
            break;
        }
        size_t start = ov[0], piece = ov[1] - ov[0];
        if (!bpe_work_reserve(&work, piece)) {
            st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory encoding a %zu-byte word", piece);
            break;
        }
        count += bpe_piece(t, bytes + start, piece, &work, out + count);
        offset = ov[1];
    }
    free(work.sym);
    free(work.heap);
    free(work.merged);
    pcre2_match_data_free(match);
    if (st != VKG_OK || count == 0) {
        free(out);
        return st;
    }
    int32_t *fitted = realloc(out, count * sizeof *out);
    *ids = fitted ? fitted : out;
    *n = count;
    return VKG_OK;
}

vkg_status vkg_tokenizer_decode(const vkg_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len,
                                vkg_error *err) {
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!t || !text || !len || (!ids && n > 0))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_tokenizer_decode: NULL argument");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                                 "unknown token id %ld at position %zu (the vocabulary has ids 0..%ld)",
                                 (long)ids[i], i, (long)t->vocab_size - 1);
        total += t->token_length[ids[i]];
    }
    char *out = malloc(total + 1);
    if (!out) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory decoding %zu tokens", n);
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(out + used, t->token_bytes + t->token_offset[ids[i]], t->token_length[ids[i]]);
        used += t->token_length[ids[i]];
    }
    out[used] = '\0';
    *text = out;
    *len = used;
    return VKG_OK;
}
