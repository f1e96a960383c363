/*
 * The parts of a tokenizer.json pipeline, as Hugging Face tokenizers runs it:
 *
 *   text -> added tokens found (tok_added.c) -> each stretch between them normalized
 *   (tok_normalize.c) -> split into words (tok_pretokenize.c) -> each word to ids by BPE
 *   (tok_bpe.c) -> special tokens added around the ids (tok_post.c)
 *
 *   ids -> token strings -> decoders (tok_decode.c) -> text
 *
 * Each component is chosen by its "type" in tokenizer.json and built from its JSON object by
 * that unit's parse function; a type the unit does not know is refused by name.  tokenizer.c
 * loads the files and runs the pipeline.
 */
#ifndef VKG_IO_TOK_INTERNAL_H
#define VKG_IO_TOK_INTERNAL_H

#include "base/error.h"
#include "base/json.h"
#include "vkgraph_model.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stddef.h>
#include <stdint.h>

/* ---- text buffers --------------------------------------------------------------------------- */

typedef struct tok_buf {
    char *data;
    size_t len, cap;
    int oom; /* a growth failed: the contents are incomplete */
} tok_buf;

void tok_buf_put(tok_buf *b, const void *s, size_t len);
void tok_buf_free(tok_buf *b);

/* A list of pieces of text in one buffer.  first marks a piece that starts the caller's text
 * (offset 0 of the original), which Metaspace's prepend_scheme "first" asks about. */
typedef struct tok_span {
    size_t off, len;
    int first;
} tok_span;

typedef struct tok_pieces {
    tok_buf text;
    tok_span *span;
    size_t n, cap;
} tok_pieces;

void tok_pieces_begin(tok_pieces *p, int first); /* starts a new, empty piece */
void tok_pieces_put(tok_pieces *p, const void *s, size_t len); /* appends to the last piece */
char *tok_pieces_extend(tok_pieces *p, size_t len); /* len more bytes of the last piece, NULL if out of memory */
void tok_pieces_add(tok_pieces *p, const void *s, size_t len, int first);
void tok_pieces_clear(tok_pieces *p);
void tok_pieces_free(tok_pieces *p);
int tok_pieces_failed(const tok_pieces *p);
void tok_pieces_swap(tok_pieces *a, tok_pieces *b);
/* An empty piece of an empty text has no buffer yet: "" rather than NULL + 0 (undefined). */
static inline const char *tok_piece(const tok_pieces *p, size_t i) {
    return p->text.data ? p->text.data + p->span[i].off : "";
}

/* Helpers shared by the units. */
size_t tok_utf8_len(unsigned char lead);            /* bytes of the sequence lead starts (valid UTF-8) */
uint32_t tok_utf8_decode(const char *s, size_t *n); /* code point at s (valid UTF-8), its length in *n */
int tok_is_whitespace(uint32_t cp);                 /* Unicode White_Space, as Rust's char::is_whitespace */
/* Compiles a tokenizer.json pattern: {"String": s} (literal) or {"Regex": r}.  where names it. */
pcre2_code *tok_compile_pattern(const vkg_json *pattern, const char *where, vkg_error *err);
pcre2_code *tok_compile_regex(const char *regex, size_t len, uint32_t options, const char *where, vkg_error *err);
/* A regex as Oniguruma reads it (\s as Unicode White_Space), compiled with PCRE2. */
pcre2_code *tok_compile_onig(const char *regex, size_t len, const char *where, vkg_error *err);
/* Oniguruma's \s (Unicode White_Space), as the inside of a PCRE2 class. */
#define TOK_ONIG_SPACE "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
/* "type" of a component, or NULL (with the message set) when missing. */
const char *tok_type(const vkg_json *v, const char *where, vkg_error *err);
vkg_status tok_unsupported(const char *where, const char *type, vkg_error *err);

/* ---- normalizers (tok_normalize.c) ---------------------------------------------------------- */

typedef struct tok_normalizer tok_normalizer;
/* v may be JSON null (no normalizer): *out is then NULL. */
vkg_status tok_normalizer_parse(const vkg_json *v, const char *where, tok_normalizer **out, vkg_error *err);
void tok_normalizer_free(tok_normalizer *n);
/* Normalizes s into out (cleared first).  n NULL copies. */
vkg_status tok_normalize(const tok_normalizer *n, const char *s, size_t len, tok_buf *out, vkg_error *err);

/* ---- pre-tokenizers (tok_pretokenize.c) ----------------------------------------------------- */

typedef struct tok_pretok tok_pretok;
vkg_status tok_pretok_parse(const vkg_json *v, const char *where, tok_pretok **out, vkg_error *err);
/* GPT-2's ByteLevel pre-tokenizer (its split pattern, no prefix space), for vocab.json files. */
vkg_status tok_pretok_gpt2(tok_pretok **out, vkg_error *err);
void tok_pretok_free(tok_pretok *p);
/* Splits every piece of in into out (cleared first); in may be clobbered.  p NULL copies. */
vkg_status tok_pretokenize(const tok_pretok *p, tok_pieces *in, tok_pieces *out, vkg_error *err);

/* ---- vocabulary and BPE (tok_bpe.c) --------------------------------------------------------- */

/* id -> token string for every id (the model's and the added tokens'), and the model's
 * string -> id map, which BPE looks symbols up in (added tokens are not in it). */
typedef struct tok_vocab {
    int32_t n;
    char *strs;
    uint32_t *off, *len;
    uint32_t *slots; /* id + 1 of a model token, 0 empty; open addressing */
    size_t mask;
} tok_vocab;

int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t len); /* -1 when absent */

typedef struct tok_bpe {
    tok_vocab vocab;
    struct tok_merge *merges; /* (left, right) -> rank, result; open addressing */
    size_t merge_mask;
    int32_t unk;            /* unk_token's id, -1 none */
    int fuse_unk, byte_fallback, ignore_merges;
    int rounds;             /* merge every occurrence of the best pair before any new pair (OpenAI's encoder) */
    int split_at_marker;    /* no merge crosses into a U+2581 that follows another character (tok_bpe.c) */
    int32_t byte_ids[256];  /* <0xNN> tokens for byte_fallback, -1 absent */
} tok_bpe;

/* From tokenizer.json's model and added_tokens (ids that are not in model.vocab join the id
 * table).  where names the file. */
vkg_status tok_bpe_parse(tok_bpe *b, const vkg_json *model, const vkg_json *added, const char *where,
                         vkg_error *err);
/* From vocab.json and merges.txt (or encoder.json and vocab.bpe). */
vkg_status tok_bpe_load_files(tok_bpe *b, const char *vocab_path, const char *merges_path, vkg_error *err);
void tok_bpe_free(tok_bpe *b);

typedef struct tok_bpe_work tok_bpe_work;
tok_bpe_work *tok_bpe_work_new(void);
void tok_bpe_work_free(tok_bpe_work *w);
/* Appends the ids of one word to ids (a growable array).  Returns 0 when out of memory. */
int tok_bpe_word(const tok_bpe *b, tok_bpe_work *w, const char *word, size_t len, int32_t **ids, size_t *n,
                 size_t *cap);

/* ---- added tokens (tok_added.c) ------------------------------------------------------------- */

typedef struct tok_added_token {
    char *content; /* as matched: normalized already when normalized is set */
    size_t len;
    int32_t id;
    int special, lstrip, rstrip, single_word, normalized;
} tok_added_token;

typedef struct tok_added {
    tok_added_token *tok;
    size_t n;
    /* per first byte, the tokens starting with it, longest first; raw: normalized == 0 */
    uint32_t *bucket[2][256];
    uint32_t bucket_n[2][256];
} tok_added;

vkg_status tok_added_parse(tok_added *a, const vkg_json *added, const tok_normalizer *norm, vkg_error *err);
/* Registers one token (the vocab.json files' "<|endoftext|>"). */
vkg_status tok_added_push(tok_added *a, const char *content, size_t len, int32_t id, int special, vkg_error *err);
vkg_status tok_added_index(tok_added *a, vkg_error *err);
void tok_added_free(tok_added *a);
/* A match of an added token in s: [start, end) includes the whitespace lstrip and rstrip take. */
typedef struct tok_added_match {
    size_t start, end;
    int32_t id;
} tok_added_match;
/* Finds the added tokens of one kind (normalized 0 or 1) in s, left to right, leftmost-longest;
 * special tokens are skipped (left as text) when split_special.  Returns the number of matches
 * written to *out (the caller frees), or (size_t)-1 when out of memory. */
size_t tok_added_find(const tok_added *a, int normalized, const char *s, size_t len, int split_special,
                      tok_added_match **out);

/* ---- post-processors (tok_post.c) ----------------------------------------------------------- */

typedef struct tok_post {
    int32_t *before, *after; /* ids around a single sequence */
    size_t n_before, n_after;
} tok_post;

vkg_status tok_post_parse(tok_post *p, const vkg_json *v, const tok_vocab *vocab, const char *where,
                          vkg_error *err);
void tok_post_free(tok_post *p);

/* ---- decoders (tok_decode.c) ---------------------------------------------------------------- */

typedef struct tok_decoder tok_decoder;
vkg_status tok_decoder_parse(const vkg_json *v, const char *where, tok_decoder **out, vkg_error *err);
vkg_status tok_decoder_byte_level(tok_decoder **out, vkg_error *err);
void tok_decoder_free(tok_decoder *d);
/* Runs the decoders over the token strings in p (in place).  whole: p is a full sequence (the
 * first token's leading space is stripped where the decoders say so); else one token alone, as
 * token_bytes shows it.  d NULL joins the tokens with spaces, as tokenizers does. */
vkg_status tok_decode(const tok_decoder *d, tok_pieces *p, int whole, vkg_error *err);

/* The byte-level alphabet (GPT-2's bytes_to_unicode). */
uint32_t tok_byte_char(unsigned b);   /* the code point spelling byte b */
int tok_char_byte(uint32_t cp);       /* the byte code point cp spells, -1 if none */

#endif
