/* Tests of the GPT-2 tokenizer (src/io/tokenizer.c) and `vkgraph tokenize`: ids against the
 * reference's golden ids (tests/data/tokenizer_cases.txt, made by tools/make_tokenizer_golden.js),
 * exact round trips, invalid UTF-8, unknown ids, both file namings, malformed files, long inputs
 * and the command's output and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/tokenizer.h"
#include "support/test_util.h"
#include "vkgraph.h"

static const char lesson[] = "The animal didn't cross the street because it was too tired";
static const int32_t lesson_ids[] = {464, 5044, 1422, 470, 3272, 262, 4675, 780, 340, 373, 1165, 10032};

/* ---- helpers --------------------------------------------------------------------------------- */

static char data_dir[1024], tok_dir[1100];

static void find_dirs(void) {
    const char *data = getenv("VKG_TEST_DATA");
    snprintf(data_dir, sizeof data_dir, "%s", data ? data : "data");
    snprintf(tok_dir, sizeof tok_dir, "%s/../../data/gpt2-tokenizer", data_dir);
}

static void write_file(const char *dir, const char *name, const char *data, size_t len) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void write_text(const char *dir, const char *name, const char *text) {
    write_file(dir, name, text, strlen(text));
}

static void make_temp_dir(char *dir, size_t size) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, size, "%s/vkg_tok_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(dir));
}

static void remove_temp_dir(const char *dir) {
    static const char *const names[] = {"vocab.json", "merges.txt", "encoder.json", "vocab.bpe", "in.txt", "bad.txt"};
    char path[1200];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* As OpenAI's encoder (the reference of the golden ids) reads a text: "<|endoftext|>" in it is
 * plain text. */
static void encode_ok(const vkg_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n) {
    vkg_error err = {0};
    vkg_status st = vkg_tokenizer_encode_with(t, text, len, VKG_TOKENIZE_SPLIT_SPECIAL, ids, n, &err);
    if (st != VKG_OK) fail_msg("encode failed: %s", err.message);
}

/* decode(ids) must give exactly len bytes of text. */
static void assert_decodes_to(const vkg_tokenizer *t, const int32_t *ids, size_t n, const char *text, size_t len) {
    vkg_error err = {0};
    char *back = NULL;
    size_t back_len = 0;
    if (vkg_tokenizer_decode(t, ids, n, &back, &back_len, &err) != VKG_OK) fail_msg("decode: %s", err.message);
    assert_int_equal(back_len, len);
    assert_memory_equal(back, text, len);
    assert_int_equal(back[len], '\0');
    free(back);
}

static int hex_digit(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* ---- fixture: the real GPT-2 tokenizer, loaded once ------------------------------------------ */

static int setup_gpt2(void **state) {
    find_dirs();
    vkg_error err = {0};
    vkg_tokenizer *t = NULL;
    if (vkg_tokenizer_load(tok_dir, &t, &err) != VKG_OK) {
        fprintf(stderr, "cannot load %s: %s\n", tok_dir, err.message);
        return -1;
    }
    *state = t;
    return 0;
}

static int teardown_gpt2(void **state) {
    vkg_tokenizer_free(*state);
    return 0;
}

static void test_vocabulary_facts(void **state) {
    const vkg_tokenizer *t = *state;
    assert_int_equal(vkg_tokenizer_vocab_size(t), 50257);
    assert_int_equal(vkg_tokenizer_eot(t), 50256);
    size_t len = 0;
    const char *b = vkg_tokenizer_token_bytes(t, 50256, &len);
    assert_int_equal(len, 13);
    assert_memory_equal(b, "<|endoftext|>", 13);
    b = vkg_tokenizer_token_bytes(t, 220, &len); /* "Ġ" in the file: a space */
    assert_int_equal(len, 1);
    assert_int_equal(b[0], ' ');
    b = vkg_tokenizer_token_bytes(t, 198, &len); /* "Ċ": a newline */
    assert_int_equal(len, 1);
    assert_int_equal(b[0], '\n');
    b = vkg_tokenizer_token_bytes(t, 10032, &len);
    assert_int_equal(len, 6);
    assert_memory_equal(b, " tired", 6);
    assert_null(vkg_tokenizer_token_bytes(t, -1, &len));
    assert_null(vkg_tokenizer_token_bytes(t, 50257, &len));
    /* Ids 0..255 are the 256 single bytes, each exactly once. */
    int seen[256] = {0};
    for (int32_t id = 0; id < 256; id++) {
        b = vkg_tokenizer_token_bytes(t, id, &len);
        assert_int_equal(len, 1);
        seen[(unsigned char)b[0]]++;
    }
    for (int i = 0; i < 256; i++) assert_int_equal(seen[i], 1);
}

static void test_lesson_sentence(void **state) {
    const vkg_tokenizer *t = *state;
    int32_t *ids = NULL;
    size_t n = 0;
    encode_ok(t, lesson, strlen(lesson), &ids, &n);
    assert_int_equal(n, sizeof lesson_ids / sizeof lesson_ids[0]);
    assert_memory_equal(ids, lesson_ids, sizeof lesson_ids);
    assert_decodes_to(t, ids, n, lesson, strlen(lesson));
    free(ids);
}

/* Every case of the golden file: same ids as the reference, and an exact round trip. */
static void test_golden_cases(void **state) {
    const vkg_tokenizer *t = *state;
    char path[1200];
    snprintf(path, sizeof path, "%s/tokenizer_cases.txt", data_dir);
    char *file = test_read_file(path, NULL);
    int cases = 0, failures = 0;
    for (char *line = strtok(file, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        assert_non_null(tab2);
        *tab1 = *tab2 = '\0';
        const char *hex = tab1 + 1;
        size_t len = strlen(hex) / 2;
        char *text = malloc(len + 1);
        int32_t *want = malloc((strlen(tab2 + 1) / 2 + 1) * sizeof *want);
        assert_true(text && want);
        for (size_t i = 0; i < len; i++) text[i] = (char)(hex_digit(hex[2 * i]) * 16 + hex_digit(hex[2 * i + 1]));
        size_t n_want = 0;
        for (char *p = tab2 + 1; *p;) {
            want[n_want++] = (int32_t)strtol(p, &p, 10);
            if (*p == ',') p++;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        encode_ok(t, text, len, &ids, &n);
        if (n != n_want || (n && memcmp(ids, want, n * sizeof *ids) != 0)) {
            fprintf(stderr, "case %s: got", line);
            for (size_t i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? "," : " ", (int)ids[i]);
            fprintf(stderr, "\n");
            failures++;
        }
        assert_decodes_to(t, ids, n, text, len);
        free(ids);
        free(want);
        free(text);
        cases++;
    }
    free(file);
    assert_int_equal(failures, 0);
    assert_true(cases >= 60);
}

/* Random strings drawn from many scripts, spaces and symbols: decode(encode(x)) == x. */
static void test_random_round_trips(void **state) {
    const vkg_tokenizer *t = *state;
    static const uint32_t ranges[][2] = {
        {0x20, 0x7E}, {0x20, 0x20}, {0x09, 0x0D}, {0x00, 0x1F}, {0xA0, 0xFF}, {0x300, 0x36F}, {0x400, 0x4FF},
        {0x600, 0x6FF}, {0x900, 0x97F}, {0x2000, 0x206F}, {0x3000, 0x30FF}, {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3},
        {0xFE00, 0xFEFF}, {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF}, {0x30, 0x39}, {0x27, 0x27}};
    enum { N_RANGES = sizeof ranges / sizeof ranges[0] };
    vkg_rng rng;
    vkg_rng_seed(&rng, 2024);
    char text[4 * 300];
    for (int round = 0; round < 300; round++) {
        size_t len = 0, chars = vkg_rng_next(&rng) % 300;
        for (size_t c = 0; c < chars; c++) {
            const uint32_t *r = ranges[vkg_rng_next(&rng) % N_RANGES];
            uint32_t cp = r[0] + (uint32_t)(vkg_rng_next(&rng) % (r[1] - r[0] + 1));
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x'; /* surrogates are not characters */
            if (cp < 0x80) text[len++] = (char)cp;
            else if (cp < 0x800) { text[len++] = (char)(0xC0 | cp >> 6); text[len++] = (char)(0x80 | (cp & 63)); }
            else if (cp < 0x10000) {
                text[len++] = (char)(0xE0 | cp >> 12);
                text[len++] = (char)(0x80 | ((cp >> 6) & 63));
                text[len++] = (char)(0x80 | (cp & 63));
            } else {
                text[len++] = (char)(0xF0 | cp >> 18);
                text[len++] = (char)(0x80 | ((cp >> 12) & 63));
                text[len++] = (char)(0x80 | ((cp >> 6) & 63));
                text[len++] = (char)(0x80 | (cp & 63));
            }
        }
        int32_t *ids = NULL;
        size_t n = 0;
        encode_ok(t, text, len, &ids, &n);
        assert_true(n <= len);
        for (size_t i = 0; i < n; i++) assert_true(ids[i] >= 0 && ids[i] < 50256);
        assert_decodes_to(t, ids, n, text, len);
        free(ids);
    }
}

static void test_invalid_utf8(void **state) {
    const vkg_tokenizer *t = *state;
    static const struct { const char *text; size_t len; size_t offset; const char *why; } cases[] = {
        {"\x80", 1, 0, "continuation byte 0x80"},
        {"ab\xBF" "cd", 5, 2, "continuation byte 0xBF"},
        {"ab\xC3", 3, 2, "cut off"},
        {"x\xE2\x82", 3, 1, "cut off"},
        {"\xF0\x9F\x98", 3, 0, "cut off"},
        {"\xC3(", 2, 0, "not a continuation byte"},
        {"ok \xC0\xAF", 5, 3, "overlong"},
        {"\xE0\x80\xAF", 3, 0, "overlong encoding of U+002F"},
        {"\xF0\x80\x80\xAF", 4, 0, "overlong"},
        {"abc\xED\xA0\x80", 6, 3, "surrogate U+D800"},
        {"\xED\xBF\xBF", 3, 0, "surrogate U+DFFF"},
        {"\xF4\x90\x80\x80", 4, 0, "above U+10FFFF"},
        {"\xF5\x80\x80\x80", 4, 0, "never appears"},
        {"caf\xC3\xA9 \xFF", 7, 6, "byte 0xFF"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vkg_error err = {0};
        int32_t *ids = (int32_t *)&err; /* must be reset to NULL */
        size_t n = 99;
        assert_int_equal(vkg_tokenizer_encode(t, cases[i].text, cases[i].len, &ids, &n, &err),
                         VKG_ERR_INVALID_ARGUMENT);
        assert_null(ids);
        assert_int_equal(n, 0);
        char where[64];
        snprintf(where, sizeof where, "at byte %zu:", cases[i].offset);
        if (!strstr(err.message, where) || !strstr(err.message, cases[i].why))
            fail_msg("case %zu: message \"%s\" lacks \"%s\" or \"%s\"", i, err.message, where, cases[i].why);
    }
}

static void test_decode_errors_and_partial_bytes(void **state) {
    const vkg_tokenizer *t = *state;
    static const int32_t bad[][3] = {{464, -1, 5044}, {50257, 0, 0}, {0, 0, INT32_MAX}};
    static const char *const names[] = {"unknown token id -1 at position 1", "unknown token id 50257 at position 0",
                                        "unknown token id 2147483647 at position 2"};
    for (int i = 0; i < 3; i++) {
        vkg_error err = {0};
        char *text = (char *)&err;
        size_t len = 7;
        assert_int_equal(vkg_tokenizer_decode(t, bad[i], 3, &text, &len, &err), VKG_ERR_INVALID_ARGUMENT);
        assert_null(text);
        assert_int_equal(len, 0);
        if (!strstr(err.message, names[i])) fail_msg("\"%s\" lacks \"%s\"", err.message, names[i]);
    }
    /* Nothing in, nothing out. */
    assert_decodes_to(t, NULL, 0, "", 0);
    int32_t *ids = (int32_t *)state;
    size_t n = 5;
    encode_ok(t, "", 0, &ids, &n);
    assert_null(ids);
    assert_int_equal(n, 0);
    /* "😀" is two tokens that split the character: each decodes to its raw bytes. */
    encode_ok(t, "\xF0\x9F\x98\x80", 4, &ids, &n);
    assert_int_equal(n, 2);
    size_t first_len = 0;
    const char *first = vkg_tokenizer_token_bytes(t, ids[0], &first_len);
    assert_true(first_len > 0 && first_len < 4);
    assert_memory_equal(first, "\xF0\x9F\x98\x80", first_len);
    assert_decodes_to(t, ids, 1, "\xF0\x9F\x98\x80", first_len);
    free(ids);
}

/* Very long pieces (a run of spaces, a word of one letter, a number) stay exact and fast. */
static void test_long_pieces(void **state) {
    const vkg_tokenizer *t = *state;
    enum { LONG = 100000 };
    char *text = malloc(LONG + 2);
    assert_non_null(text);
    memset(text, ' ', LONG);
    text[LONG] = 'x';
    int32_t *ids = NULL;
    size_t n = 0;
    encode_ok(t, text, LONG + 1, &ids, &n);
    /* All spaces but the last go alone (GPT-2 has no multi-space tokens); the last joins "x". */
    assert_int_equal(n, LONG);
    for (size_t i = 0; i + 1 < n; i++) assert_int_equal(ids[i], 220);
    assert_int_equal(ids[n - 1], 2124); /* " x" */
    free(ids);
    const char fills[] = {'a', '7', '.', '\n'};
    for (size_t f = 0; f < sizeof fills; f++) {
        memset(text, fills[f], LONG);
        encode_ok(t, text, LONG, &ids, &n);
        assert_true(n > 0 && n < LONG);
        assert_decodes_to(t, ids, n, text, LONG);
        free(ids);
    }
    free(text);
}

/* About 10 KB of prose: prints how long one encode takes (the report quotes it). */
static void test_encode_10kb_timing(void **state) {
    const vkg_tokenizer *t = *state;
    static const char para[] =
        "Attention lets each position look back at the ones before it. In \"The animal didn't cross the "
        "street because it was too tired\", the word \"it\" attends mostly to \"animal\"; GPT-2 has 12 "
        "layers, 12 heads and 768 channels (124M parameters), and 50,257 tokens.\n\n";
    size_t plen = strlen(para), len = 0;
    char *text = malloc(10240 + plen);
    assert_non_null(text);
    while (len < 10240) { memcpy(text + len, para, plen); len += plen; }
    int32_t *ids = NULL;
    size_t n = 0;
    struct timespec a, b;
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        free(ids);
        clock_gettime(CLOCK_MONOTONIC, &a);
        encode_ok(t, text, len, &ids, &n);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
        if (ms < best) best = ms;
    }
    printf("encode of %zu bytes: %zu tokens in %.2f ms (best of 5)\n", len, n, best);
    assert_true(best < 1000.0); /* generous: sanitizer builds run several times slower */
    assert_decodes_to(t, ids, n, text, len);
    free(ids);
    free(text);
}


/* The same files under Hugging Face's names load too, and win over OpenAI's names. */
static void test_hugging_face_names(void **state) {
    (void)state;
    char dir[1024], path[1200];
    make_temp_dir(dir, sizeof dir);
    size_t len;
    snprintf(path, sizeof path, "%s/encoder.json", tok_dir);
    char *data = test_read_file(path, &len);
    write_file(dir, "vocab.json", data, len);
    free(data);
    snprintf(path, sizeof path, "%s/vocab.bpe", tok_dir);
    data = test_read_file(path, &len);
    write_file(dir, "merges.txt", data, len);
    free(data);
    write_text(dir, "encoder.json", "not json");
    write_text(dir, "vocab.bpe", "not merges");
    vkg_error err = {0};
    vkg_tokenizer *t = NULL;
    if (vkg_tokenizer_load(dir, &t, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_tokenizer_vocab_size(t), 50257);
    int32_t *ids = NULL;
    size_t n = 0;
    encode_ok(t, lesson, strlen(lesson), &ids, &n);
    assert_int_equal(n, sizeof lesson_ids / sizeof lesson_ids[0]);
    assert_memory_equal(ids, lesson_ids, sizeof lesson_ids);
    free(ids);
    vkg_tokenizer_free(t);
    remove_temp_dir(dir);
}

/* ---- small hand-made vocabularies ------------------------------------------------------------- */

static int byte_printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

/* A vocabulary whose ids 0..255 are the bytes (spelled in GPT-2's byte alphabet), then extra,
 * a list of JSON members such as "\"he\": 256" (may be ""). */
static char *small_vocab(const char *extra) {
    char *json = malloc(256 * 16 + strlen(extra) + 8);
    assert_non_null(json);
    size_t used = 0;
    unsigned next_extra = 0x100;
    json[used++] = '{';
    for (unsigned b = 0; b < 256; b++) {
        unsigned cp = byte_printable(b) ? b : next_extra++;
        used += (size_t)sprintf(json + used, "%s\"", b ? ", " : "");
        if (cp == '"' || cp == '\\') json[used++] = '\\';
        if (cp < 0x80) json[used++] = (char)cp;
        else { json[used++] = (char)(0xC0 | cp >> 6); json[used++] = (char)(0x80 | (cp & 63)); }
        used += (size_t)sprintf(json + used, "\": %u", b);
    }
    sprintf(json + used, "%s%s}", *extra ? ", " : "", extra);
    return json;
}

/* Writes vocab.json + merges.txt into a fresh dir and loads them: the status, err filled. */
static vkg_status load_small(const char *vocab_json, const char *merges, vkg_tokenizer **t, vkg_error *err,
                             char *dir, size_t dir_size) {
    make_temp_dir(dir, dir_size);
    write_text(dir, "vocab.json", vocab_json);
    write_text(dir, "merges.txt", merges);
    return vkg_tokenizer_load(dir, t, err);
}

static void assert_encodes(const vkg_tokenizer *t, const char *text, const int32_t *want, size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0;
    encode_ok(t, text, strlen(text), &ids, &n);
    assert_int_equal(n, n_want);
    assert_memory_equal(ids, want, n * sizeof *ids);
    free(ids);
}

static void test_small_vocab_rules(void **state) {
    (void)state;
    static const struct { const char *extra, *merges, *text; int32_t want[4]; size_t n; } cases[] = {
        {"\"he\": 256, \"ll\": 257, \"hell\": 258, \"hello\": 259", "#version: 0.2\nh e\nl l\nhe ll\nhell o\n",
         "hellohello hello", {259, 259, 32, 259}, 4},
        /* One round merges every "a b" before the "ab a" that round creates, as the reference does. */
        {"\"ab\": 256, \"aba\": 257", "ab a\na b\n", "abab", {256, 256}, 2},
        {"\"ab\": 256, \"aba\": 257", "ab a\na b\n", "aba", {257}, 1},
        /* CRLF line ends, blank lines and stray spaces are tolerated. */
        {"\"he\": 256, \"ll\": 257", "#version: 0.2\r\nh e \r\n\r\n  l\tl\r\n", "hell", {256, 257}, 2},
        /* A pair listed twice keeps its later rank: "b c" (rank 1) beats "a b" (rank 2). */
        {"\"ab\": 256, \"bc\": 257", "#v\na b\nb c\na b\n", "abc", {'a', 257}, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *vocab = small_vocab(cases[i].extra), dir[1024];
        vkg_error err = {0};
        vkg_tokenizer *t = NULL;
        if (load_small(vocab, cases[i].merges, &t, &err, dir, sizeof dir) != VKG_OK) fail_msg("%s", err.message);
        assert_int_equal(vkg_tokenizer_eot(t), -1);
        assert_encodes(t, cases[i].text, cases[i].want, cases[i].n);
        vkg_tokenizer_free(t);
        remove_temp_dir(dir);
        free(vocab);
    }
    /* A token outside the byte alphabet stands for its own UTF-8 bytes. */
    char *vocab = small_vocab("\"<|endoftext|>\": 257, \"\\u4e00\": 256"), dir[1024];
    vkg_error err = {0};
    vkg_tokenizer *t = NULL;
    assert_int_equal(load_small(vocab, "", &t, &err, dir, sizeof dir), VKG_OK);
    assert_int_equal(vkg_tokenizer_vocab_size(t), 258);
    assert_int_equal(vkg_tokenizer_eot(t), 257);
    size_t len = 0;
    const char *b = vkg_tokenizer_token_bytes(t, 256, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(b, "\xE4\xB8\x80", 3);
    vkg_tokenizer_free(t);
    remove_temp_dir(dir);
    free(vocab);
}

/* Loads vocab_json + merges and expects status with every one of the message parts. */
static void expect_load_error(const char *vocab_json, const char *merges, vkg_status want, const char *part1,
                              const char *part2) {
    char dir[1024];
    vkg_error err = {0};
    vkg_tokenizer *t = (vkg_tokenizer *)&err;
    vkg_status st = load_small(vocab_json, merges, &t, &err, dir, sizeof dir);
    remove_temp_dir(dir);
    assert_null(t);
    if (st != want || !strstr(err.message, part1) || (part2 && !strstr(err.message, part2)))
        fail_msg("status %s, message \"%s\": wanted %s with \"%s\" and \"%s\"", vkg_status_name(st), err.message,
                 vkg_status_name(want), part1, part2 ? part2 : "");
}

static void test_malformed_vocab(void **state) {
    (void)state;
    const char *m = "#version: 0.2\n";
    expect_load_error("{\"a\": 0, \"b\": ", m, VKG_ERR_FORMAT, "vocab.json: JSON line 1", NULL);
    expect_load_error("{\n\"a\": 0,\n\"b\" 1}", m, VKG_ERR_FORMAT, "vocab.json: JSON line 3", NULL);
    expect_load_error("[1, 2]", m, VKG_ERR_FORMAT, "vocab.json: expected an object", "found array");
    expect_load_error("{}", m, VKG_ERR_FORMAT, "vocab.json: the vocabulary is empty", NULL);
    expect_load_error("{\"a\": \"0\"}", m, VKG_ERR_FORMAT, "entry 1 (token \"a\")", "id is string");
    expect_load_error("{\"a\": -1}", m, VKG_ERR_FORMAT, "id -1 is not an integer in 0..0", NULL);
    expect_load_error("{\"a\": 0, \"b\": 0.5}", m, VKG_ERR_FORMAT, "entry 2 (token \"b\"): id 0.5 is not", NULL);
    expect_load_error("{\"a\": 0, \"b\": 2}", m, VKG_ERR_FORMAT, "id 2 is not an integer in 0..1", NULL);
    expect_load_error("{\"a\": 1, \"b\": 1}", m, VKG_ERR_FORMAT, "entry 2 (token \"b\"): id 1 is already used", NULL);
    expect_load_error("{\"a\": 0}", m, VKG_ERR_FORMAT, "no token for byte 0x00", "not a byte-level BPE");
}

static void test_malformed_merges(void **state) {
    (void)state;
    char *v = small_vocab("\"he\": 256");
    expect_load_error(v, "#version: 0.2\nh e\nlonely\n", VKG_ERR_FORMAT, "merges.txt:3: expected two tokens",
                      "found 1 (\"lonely\")");
    expect_load_error(v, "h e x\n", VKG_ERR_FORMAT, "merges.txt:1: expected two tokens", "found 3");
    expect_load_error(v, "#version: 0.2\nh zz\n", VKG_ERR_FORMAT, "merges.txt:2: token \"zz\" is not in vocab.json",
                      NULL);
    expect_load_error(v, "#version: 0.2\nh e\nx y\n", VKG_ERR_FORMAT,
                      "merges.txt:3: merging \"x\" and \"y\" makes a token that is not in vocab.json", NULL);
    free(v);
}

static void test_missing_files(void **state) {
    (void)state;
    vkg_error err = {0};
    vkg_tokenizer *t = (vkg_tokenizer *)&err;
    assert_int_equal(vkg_tokenizer_load("/nonexistent/vkg", &t, &err), VKG_ERR_IO);
    assert_null(t);
    assert_non_null(strstr(err.message, "no tokenizer in /nonexistent/vkg: looked for tokenizer.json, vocab.json + merges.txt and "
                                        "encoder.json + vocab.bpe"));
    assert_int_equal(vkg_tokenizer_load(NULL, &t, &err), VKG_ERR_INVALID_ARGUMENT);
    char dir[1024];
    make_temp_dir(dir, sizeof dir);
    assert_int_equal(vkg_tokenizer_load(dir, &t, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "looked for tokenizer.json, vocab.json"));
    write_text(dir, "vocab.json", "{}");
    assert_int_equal(vkg_tokenizer_load(dir, &t, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "vocab.json is there but merges.txt is missing"));
    remove_temp_dir(dir);
    make_temp_dir(dir, sizeof dir);
    write_text(dir, "vocab.bpe", "#version: 0.2\n");
    assert_int_equal(vkg_tokenizer_load(dir, &t, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "vocab.bpe is there but encoder.json is missing"));
    remove_temp_dir(dir);
    assert_null(t);
}

/* ---- the command ------------------------------------------------------------------------------ */

typedef struct cli_result { int status; char *out, *err; size_t out_len; } cli_result;

/* Runs `vkgraph tokenize ARGS...` with stdout and stderr captured. */
static cli_result run_tokenize(const char *dir, const char *const *args) {
    char *argv[16], out_path[1200], err_path[1200];
    int argc = 0;
    argv[argc++] = getenv("VKG_BINARY");
    argv[argc++] = "tokenize";
    for (; *args; args++) argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    snprintf(out_path, sizeof out_path, "%s/out.txt", dir);
    snprintf(err_path, sizeof err_path, "%s/err.txt", dir);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    cli_result r = {WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, NULL, test_read_file(err_path, NULL), 0};
    r.out = test_read_file(out_path, &r.out_len);
    unlink(out_path);
    unlink(err_path);
    return r;
}

static void expect_cli(const char *dir, const char *const *args, int status, const char *out, size_t out_len,
                       const char *err_part) {
    cli_result r = run_tokenize(dir, args);
    if (r.status != status) fail_msg("%s %s: exit %d, stderr \"%s\"", args[0], args[1] ? args[1] : "", r.status, r.err);
    if (out) {
        assert_int_equal(r.out_len, out_len);
        assert_memory_equal(r.out, out, out_len);
    }
    if (err_part) {
        assert_memory_equal(r.err, "vkgraph tokenize: ", 18);
        if (!strstr(r.err, err_part)) fail_msg("stderr \"%s\" lacks \"%s\"", r.err, err_part);
    }
    free(r.out);
    free(r.err);
}

static void test_cli(void **state) {
    (void)state;
    const char *bin = getenv("VKG_BINARY");
    if (!bin) skip();
    if (access(bin, X_OK) != 0) fail_msg("VKG_BINARY=%s is not an executable: build the vkgraph target", bin);
    char tmp[1024], in_path[1200], bad_path[1200];
    make_temp_dir(tmp, sizeof tmp);
    write_text(tmp, "in.txt", "Hello world\n");
    write_text(tmp, "bad.txt", "caf\xC3");
    snprintf(in_path, sizeof in_path, "%s/in.txt", tmp);
    snprintf(bad_path, sizeof bad_path, "%s/bad.txt", tmp);
    const char *lesson_json = "[464, 5044, 1422, 470, 3272, 262, 4675, 780, 340, 373, 1165, 10032]\n";
    expect_cli(tmp, (const char *[]){"--tokenizer", tok_dir, "-p", lesson, NULL}, 0, lesson_json,
               strlen(lesson_json), NULL);
    expect_cli(tmp, (const char *[]){"-m", tok_dir, "-f", in_path, NULL}, 0, "[15496, 995, 198]\n", 18, NULL);
    expect_cli(tmp, (const char *[]){"-m", tok_dir, "-p", "", NULL}, 0, "[]\n", 3, NULL);
    expect_cli(tmp, (const char *[]){"--tokenizer", tok_dir, "--decode", "464,5044,1422", NULL}, 0,
               "The animal didn", 15, NULL);
    expect_cli(tmp, (const char *[]){"--tokenizer", tok_dir, "--decode", "[15496, 995, 198]", NULL}, 0,
               "Hello world\n", 12, NULL);
    expect_cli(tmp, (const char *[]){"--help", NULL}, 0, NULL, 0, NULL);
    expect_cli(tmp, (const char *[]){"--tokenizer", tok_dir, "--bogus", NULL}, 1, "", 0, "--bogus");
    expect_cli(tmp, (const char *[]){"-m", tmp, "-p", "hi", NULL}, 1, "", 0, "looked for tokenizer.json, vocab.json + merges.txt");
    expect_cli(tmp, (const char *[]){"-m", tok_dir, "-f", bad_path, NULL}, 1, "", 0, "invalid UTF-8 at byte 3");
    expect_cli(tmp, (const char *[]){"-m", tok_dir, "-f", "/nonexistent/in.txt", NULL}, 1, "", 0,
               "/nonexistent/in.txt");
    expect_cli(tmp, (const char *[]){"-m", tok_dir, "--decode", "1,99999", NULL}, 1, "", 0,
               "unknown token id 99999");
    expect_cli(tmp, (const char *[]){"-m", tok_dir, "--decode", "1,x", NULL}, 1, "", 0, "\"x\"");
    expect_cli(tmp, (const char *[]){"-m", tok_dir, NULL}, 1, "", 0, "-p");
    expect_cli(tmp, (const char *[]){"-p", "hi", NULL}, 1, "", 0, "--tokenizer");
    remove_temp_dir(tmp);
}

int main(void) {
    const struct CMUnitTest with_gpt2[] = {
        cmocka_unit_test(test_vocabulary_facts),
        cmocka_unit_test(test_lesson_sentence),
        cmocka_unit_test(test_golden_cases),
        cmocka_unit_test(test_random_round_trips),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_decode_errors_and_partial_bytes),
        cmocka_unit_test(test_long_pieces),
        cmocka_unit_test(test_encode_10kb_timing),
        cmocka_unit_test(test_hugging_face_names),
        cmocka_unit_test(test_cli),
    };
    const struct CMUnitTest files[] = {
        cmocka_unit_test(test_missing_files),
        cmocka_unit_test(test_malformed_vocab),
        cmocka_unit_test(test_malformed_merges),
        cmocka_unit_test(test_small_vocab_rules),
    };
    int failed = cmocka_run_group_tests_name("gpt2 tokenizer", with_gpt2, setup_gpt2, teardown_gpt2);
    find_dirs();
    return failed + cmocka_run_group_tests_name("tokenizer files", files, NULL, NULL);
}
