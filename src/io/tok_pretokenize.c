/* Pre-tokenizers: ByteLevel, Split, Digits, Metaspace, Whitespace, WhitespaceSplit and Sequence.
 * Each takes the pieces of text so far and splits (and for ByteLevel and Metaspace, respells)
 * every one; BPE then runs on each final piece alone. */
#include "io/tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* GPT-2's split pattern.  vocab.json and encoder.json files take \s as JavaScript defines it
 * (tab, LF, VT, FF, CR, BOM, the two Unicode line separators and every Zs space), as OpenAI's
 * reference encoder in JavaScript (gpt-3-encoder) runs it; tokenizer.json's ByteLevel takes it as
 * Oniguruma does (tok_compile_onig), as tokenizers runs it.  They differ at U+0085 and U+FEFF. */
#define JS_SPACE "\\t\\n\\x{0B}\\f\\r\\x{FEFF}\\x{2028}\\x{2029}\\p{Zs}"
static const char gpt2_pattern_js[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" JS_SPACE "\\p{L}\\p{N}]+"
    "|[" JS_SPACE "]+(?![^" JS_SPACE "])|[" JS_SPACE "]+";
static const char gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef enum { P_BYTE_LEVEL, P_SPLIT, P_METASPACE, P_SEQUENCE } pretok_kind;
/* What happens to the matches of a Split pattern (tokenizers' SplitDelimiterBehavior). */
typedef enum { B_REMOVED, B_ISOLATED, B_MERGED_PREVIOUS, B_MERGED_NEXT, B_CONTIGUOUS } split_behavior;

struct tok_pretok {
    pretok_kind kind;
    pcre2_code *re;            /* P_SPLIT; P_BYTE_LEVEL when use_regex */
    split_behavior behavior;
    int invert;
    int add_prefix_space;      /* P_BYTE_LEVEL */
    char spell[256][3];        /* P_BYTE_LEVEL: each byte's UTF-8 spelling in the alphabet */
    unsigned char spell_len[256];
    char replacement[8];       /* P_METASPACE */
    size_t replacement_len;
    int prepend;               /* P_METASPACE: 0 never, 1 always, 2 first */
    int split;
    tok_pretok **parts;        /* P_SEQUENCE */
    size_t n_parts;
};

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_parts; i++) tok_pretok_free(p->parts[i]);
    free(p->parts);
    pcre2_code_free(p->re);
    free(p);
}

static void byte_level_tables(tok_pretok *p) {
    for (unsigned b = 0; b < 256; b++) {
        uint32_t cp = tok_byte_char(b);
        if (cp < 0x80) {
            p->spell[b][0] = (char)cp;
            p->spell_len[b] = 1;
        } else {
            p->spell[b][0] = (char)(0xC0 | (cp >> 6));
            p->spell[b][1] = (char)(0x80 | (cp & 0x3F));
            p->spell_len[b] = 2;
        }
    }
}

static int bool_or(const vkg_json *v, int dflt) {
    return vkg_json_type_of(v) == VKG_JSON_BOOL ? vkg_json_bool(v) : dflt;
}

static vkg_status parse_behavior(const vkg_json *v, const char *where, split_behavior *out, vkg_error *err) {
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    const char *s = vkg_json_string(v, NULL);
    for (int i = 0; s && i < 5; i++)
        if (!strcmp(s, names[i])) {
            *out = (split_behavior)i;
            return VKG_OK;
        }
    return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: Split behavior %s%s%s is not one of Removed, Isolated, "
                         "MergedWithPrevious, MergedWithNext, Contiguous", where, s ? "\"" : "", s ? s : "missing",
                         s ? "\"" : "");
}

static vkg_status parse_one(const vkg_json *v, const char *where, tok_pretok *p, vkg_error *err) {
    const char *type = tok_type(v, where, err);
    if (!type) return err->status;
    if (!strcmp(type, "ByteLevel")) {
        p->kind = P_BYTE_LEVEL;
        p->add_prefix_space = bool_or(vkg_json_get(v, "add_prefix_space"), 1);
        byte_level_tables(p);
        if (bool_or(vkg_json_get(v, "use_regex"), 1) &&
            !(p->re = tok_compile_onig(gpt2_pattern, sizeof gpt2_pattern - 1, where, err)))
            return err->status;
        p->behavior = B_ISOLATED;
        return VKG_OK;
    }
    if (!strcmp(type, "Split")) {
        p->kind = P_SPLIT;
        p->invert = vkg_json_bool(vkg_json_get(v, "invert"));
        vkg_status st = parse_behavior(vkg_json_get(v, "behavior"), where, &p->behavior, err);
        if (st == VKG_OK && !(p->re = tok_compile_pattern(vkg_json_get(v, "pattern"), where, err))) st = err->status;
        return st;
    }
    if (!strcmp(type, "Digits")) {
        /* tokenizers takes char::is_numeric, the Unicode N categories */
        p->kind = P_SPLIT;
        p->behavior = B_ISOLATED;
        int single = vkg_json_bool(vkg_json_get(v, "individual_digits"));
        return (p->re = tok_compile_regex(single ? "\\p{N}" : "\\p{N}+", PCRE2_ZERO_TERMINATED, 0, where, err))
                   ? VKG_OK : err->status;
    }
    if (!strcmp(type, "Whitespace")) { /* words and runs of punctuation; whitespace dropped */
        p->kind = P_SPLIT;
        p->behavior = B_REMOVED;
        p->invert = 1;
        return (p->re = tok_compile_onig("\\w+|[^\\w\\s]+", 12, where, err)) ? VKG_OK : err->status;
    }
    if (!strcmp(type, "WhitespaceSplit")) {
        p->kind = P_SPLIT;
        p->behavior = B_REMOVED;
        return (p->re = tok_compile_onig("\\s+", 3, where, err)) ? VKG_OK : err->status;
    }
    if (!strcmp(type, "Metaspace")) {
        p->kind = P_METASPACE;
        size_t len = 0;
        const char *r = vkg_json_string(vkg_json_get(v, "replacement"), &len);
        if (!r) r = "\xE2\x96\x81", len = 3; /* U+2581 */
        if (len == 0 || len >= sizeof p->replacement || tok_utf8_len((unsigned char)r[0]) != len)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: Metaspace replacement must be one character", where);
        memcpy(p->replacement, r, len);
        p->replacement_len = len;
        p->split = bool_or(vkg_json_get(v, "split"), 1);
        const char *scheme = vkg_json_string(vkg_json_get(v, "prepend_scheme"), NULL);
        if (!scheme) p->prepend = bool_or(vkg_json_get(v, "add_prefix_space"), 1); /* older files */
        else if (!strcmp(scheme, "always")) p->prepend = 1;
        else if (!strcmp(scheme, "first")) p->prepend = 2;
        else if (!strcmp(scheme, "never")) p->prepend = 0;
        else return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: Metaspace prepend_scheme \"%s\" is not always, "
                                  "first or never", where, scheme);
        return VKG_OK;
    }
    if (!strcmp(type, "Sequence")) {
        p->kind = P_SEQUENCE;
        const vkg_json *list = vkg_json_get(v, "pretokenizers");
        if (vkg_json_type_of(list) != VKG_JSON_ARRAY)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: Sequence has no \"pretokenizers\" array", where);
        size_t count = vkg_json_length(list);
        if (count && !(p->parts = calloc(count, sizeof *p->parts)))
            return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        for (size_t i = 0; i < count; i++) {
            vkg_status st = tok_pretok_parse(vkg_json_at(list, i), where, &p->parts[i], err);
            if (st != VKG_OK) return st;
            p->n_parts++;
            if (!p->parts[i]) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: pretokenizers[%zu] is null", where, i);
        }
        return VKG_OK;
    }
    return tok_unsupported(where, type, err);
}

vkg_status tok_pretok_parse(const vkg_json *v, const char *where, tok_pretok **out, vkg_error *err) {
    *out = NULL;
    if (vkg_json_type_of(v) == VKG_JSON_NULL) return VKG_OK;
    tok_pretok *p = calloc(1, sizeof *p);
    if (!p) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    vkg_status st = parse_one(v, where, p, err);
    if (st != VKG_OK) {
        tok_pretok_free(p);
        return st;
    }
    *out = p;
    return VKG_OK;
}

vkg_status tok_pretok_gpt2(tok_pretok **out, vkg_error *err) {
    tok_pretok *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    p->kind = P_BYTE_LEVEL;
    p->behavior = B_ISOLATED;
    byte_level_tables(p);
    if (!(p->re = tok_compile_regex(gpt2_pattern_js, sizeof gpt2_pattern_js - 1, 0, "GPT-2's split pattern", err))) {
        tok_pretok_free(p);
        return err->status;
    }
    *out = p;
    return VKG_OK;
}

/* Splits s at the matches of re as behavior says, adding the pieces to out (empty ones are
 * dropped, as tokenizers drops them).  first: s starts the text. */
static vkg_status split_piece(const tok_pretok *p, pcre2_match_data *md, const char *s, size_t len, int first,
                              tok_pieces *out, vkg_error *err) {
    size_t from = 0, gap = 0;  /* gap: where the text not yet given to a piece starts */
    int last_match = 0, have_last = 0; /* the previous region was a match; out holds a piece of s */
    size_t first_piece = out->n;
    /* region [a, b) that is a delimiter (is_match after invert) or not */
#define EMIT(a, b, is_match)                                                                                     \
    do {                                                                                                         \
        size_t a_ = (a), b_ = (b);                                                                               \
        int m_ = (is_match);                                                                                     \
        if (b_ > a_) {                                                                                           \
            switch (p->behavior) {                                                                               \
            case B_REMOVED:                                                                                      \
                if (!m_) tok_pieces_add(out, s + a_, b_ - a_, first && a_ == 0);                                 \
                break;                                                                                           \
            case B_ISOLATED: tok_pieces_add(out, s + a_, b_ - a_, first && a_ == 0); break;                     \
            case B_CONTIGUOUS:                                                                                   \
                if (m_ && last_match && have_last) tok_pieces_put(out, s + a_, b_ - a_);                         \
                else tok_pieces_add(out, s + a_, b_ - a_, first && a_ == 0);                                     \
                break;                                                                                           \
            case B_MERGED_PREVIOUS:                                                                              \
                if (m_ && !last_match && have_last) tok_pieces_put(out, s + a_, b_ - a_);                        \
                else tok_pieces_add(out, s + a_, b_ - a_, first && a_ == 0);                                     \
                break;                                                                                           \
            case B_MERGED_NEXT: /* a delimiter takes the text that follows it */                                 \
                if (!m_ && last_match && have_last) tok_pieces_put(out, s + a_, b_ - a_);                        \
                else tok_pieces_add(out, s + a_, b_ - a_, first && a_ == 0);                                     \
                break;                                                                                           \
            }                                                                                                    \
            have_last = out->n > first_piece;                                                                    \
            last_match = m_;                                                                                     \
        }                                                                                                        \
    } while (0)
    while (from < len) {
        int rc = pcre2_match(p->re, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(rc, message, sizeof message);
            return vkg_error_set(err, rc == PCRE2_ERROR_NOMEMORY ? VKG_ERR_OUT_OF_MEMORY : VKG_ERR_INVALID_ARGUMENT,
                                 "splitting the text failed: %s", (const char *)message);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) { /* an empty match splits nothing */
            if (ov[0] >= len) break;
            from = ov[0] + tok_utf8_len((unsigned char)s[ov[0]]);
            continue;
        }
        EMIT(gap, ov[0], p->invert);
        EMIT(ov[0], ov[1], !p->invert);
        gap = from = ov[1];
    }
    EMIT(gap, len, p->invert);
#undef EMIT
    return VKG_OK;
}

static vkg_status byte_level(const tok_pretok *p, tok_pieces *in, tok_pieces *out, pcre2_match_data *md,
                             vkg_error *err) {
    tok_pieces split = {0};
    tok_pieces *src = in;
    tok_buf prefixed = {0};
    vkg_status st = VKG_OK;
    if (p->re || p->add_prefix_space) {
        for (size_t i = 0; st == VKG_OK && i < in->n; i++) {
            const char *s = tok_piece(in, i);
            size_t len = in->span[i].len;
            if (p->add_prefix_space && (len == 0 || s[0] != ' ')) {
                prefixed.len = 0;
                tok_buf_put(&prefixed, " ", 1);
                tok_buf_put(&prefixed, s, len);
                s = prefixed.data;
                len = prefixed.len;
            }
            if (p->re) st = split_piece(p, md, s, len, in->span[i].first, &split, err);
            else tok_pieces_add(&split, s, len, in->span[i].first);
        }
        src = &split;
    }
    for (size_t i = 0; st == VKG_OK && i < src->n; i++) {
        const unsigned char *s = (const unsigned char *)tok_piece(src, i);
        size_t len = src->span[i].len, spelled = 0;
        for (size_t k = 0; k < len; k++) spelled += p->spell_len[s[k]];
        tok_pieces_begin(out, src->span[i].first);
        char *o = tok_pieces_extend(out, spelled);
        if (!o) break; /* reported below */
        for (size_t k = 0; k < len; k++) {
            const char *c = p->spell[s[k]];
            o[0] = c[0];
            if (p->spell_len[s[k]] == 2) o[1] = c[1];
            o += p->spell_len[s[k]];
        }
    }
    if (st == VKG_OK && (prefixed.oom || tok_pieces_failed(&split) || tok_pieces_failed(out)))
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    tok_buf_free(&prefixed);
    tok_pieces_free(&split);
    return st;
}

static void metaspace(const tok_pretok *p, tok_pieces *in, tok_pieces *out) {
    tok_buf t = {0};
    for (size_t i = 0; i < in->n; i++) {
        const char *s = tok_piece(in, i);
        size_t len = in->span[i].len;
        t.len = 0;
        for (size_t k = 0; k < len; k++) {
            if (s[k] == ' ') tok_buf_put(&t, p->replacement, p->replacement_len);
            else tok_buf_put(&t, s + k, 1);
        }
        int starts = t.len >= p->replacement_len && !memcmp(t.data, p->replacement, p->replacement_len);
        int prepend = !starts && (p->prepend == 1 || (p->prepend == 2 && in->span[i].first));
        if (!p->split) {
            tok_pieces_begin(out, in->span[i].first);
            if (prepend) tok_pieces_put(out, p->replacement, p->replacement_len);
            tok_pieces_put(out, t.data, t.len);
            continue;
        }
        /* Split before each replacement character (MergedWithNext). */
        int open = 0;
        if (prepend) {
            tok_pieces_add(out, p->replacement, p->replacement_len, in->span[i].first);
            open = 1;
        }
        for (size_t k = 0; k < t.len;) {
            size_t c = tok_utf8_len((unsigned char)t.data[k]);
            int is_rep = c == p->replacement_len && !memcmp(t.data + k, p->replacement, c);
            if (is_rep || !open) {
                tok_pieces_begin(out, in->span[i].first && !open && k == 0);
                open = 1;
            }
            tok_pieces_put(out, t.data + k, c);
            k += c;
        }
    }
    if (t.oom) out->text.oom = 1;
    tok_buf_free(&t);
}

static vkg_status apply(const tok_pretok *p, tok_pieces *in, tok_pieces *out, vkg_error *err) {
    tok_pieces_clear(out);
    vkg_status st = VKG_OK;
    if (p->kind == P_SEQUENCE) {
        tok_pieces tmp = {0};
        for (size_t i = 0; st == VKG_OK && i < p->n_parts; i++) {
            st = apply(p->parts[i], in, &tmp, err);
            tok_pieces_swap(in, &tmp);
        }
        tok_pieces_swap(in, out); /* the result is in `in` */
        tok_pieces_free(&tmp);
    } else if (p->kind == P_METASPACE) {
        metaspace(p, in, out);
    } else {
        pcre2_match_data *md = p->re ? pcre2_match_data_create_from_pattern(p->re, NULL) : NULL;
        if (p->re && !md) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        if (p->kind == P_BYTE_LEVEL) st = byte_level(p, in, out, md, err);
        else
            for (size_t i = 0; st == VKG_OK && i < in->n; i++)
                st = split_piece(p, md, tok_piece(in, i), in->span[i].len, in->span[i].first, out, err);
        pcre2_match_data_free(md);
    }
    if (st == VKG_OK && tok_pieces_failed(out)) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    return st;
}

vkg_status tok_pretokenize(const tok_pretok *p, tok_pieces *in, tok_pieces *out, vkg_error *err) {
    if (!p) {
        tok_pieces_clear(out);
        for (size_t i = 0; i < in->n; i++) tok_pieces_add(out, tok_piece(in, i), in->span[i].len, in->span[i].first);
        return tok_pieces_failed(out) ? vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory") : VKG_OK;
    }
    return apply(p, in, out, err);
}
