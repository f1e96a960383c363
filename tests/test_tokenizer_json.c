/* tokenizer.json (src/io/tokenizer.c): GPT-2's files rewritten in tokenizers' one-file form, in
 * both merge spellings, give the golden ids; precedence over the other files; malformed files;
 * `vkgraph tokenize` on a folder that has only tokenizer.json, with --pieces. */
#include "gpt2_cli_run.h"

#include "io/tokenizer.h"

static char tok_dir[1200];

static int setup_all(void **state) {
    if (setup(state)) return -1;
    snprintf(tok_dir, sizeof tok_dir, "%s/../../data/gpt2-tokenizer", data_dir);
    return 0;
}

static void write_bytes(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A JSON string of len bytes: the byte alphabet needs escapes for '"' and '\' only. */
static size_t put_json_string(char *out, const char *s, size_t len) {
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"' || s[i] == '\\') out[o++] = '\\';
        out[o++] = s[i];
    }
    out[o++] = '"';
    return o;
}

/* GPT-2's tokenizer.json as transformers writes it, built from encoder.json (model.vocab, as it
 * is) and vocab.bpe (model.merges: "a b" strings, or ["a", "b"] pairs as newer tokenizers write). */
static void write_gpt2_tokenizer_json(const char *dir, int pairs) {
    char path[1300];
    snprintf(path, sizeof path, "%s/encoder.json", tok_dir);
    size_t vocab_len, bpe_len;
    char *vocab = test_read_file(path, &vocab_len);
    snprintf(path, sizeof path, "%s/vocab.bpe", tok_dir);
    char *bpe = test_read_file(path, &bpe_len);
    char *json = malloc(vocab_len + 3 * bpe_len + 4096);
    assert_true(vocab && bpe && json);
    size_t o = (size_t)sprintf(json,
                               "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": "
                               "[{\"id\": 50256, \"content\": \"<|endoftext|>\", \"single_word\": false, \"lstrip\": "
                               "false, \"rstrip\": false, \"normalized\": true, \"special\": true}], "
                               "\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                               "\"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}, "
                               "\"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
                               "\"trim_offsets\": false, \"use_regex\": true}, \"decoder\": {\"type\": \"ByteLevel\", "
                               "\"add_prefix_space\": true, \"trim_offsets\": true, \"use_regex\": true}, "
                               "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
                               "\"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", \"fuse_unk\": "
                               "false, \"byte_fallback\": false, \"ignore_merges\": false, \"vocab\": ");
    memcpy(json + o, vocab, vocab_len);
    o += vocab_len;
    o += (size_t)sprintf(json + o, ", \"merges\": [");
    int first = 1, line_no = 0;
    for (char *line = strtok(bpe, "\n"); line; line = strtok(NULL, "\n")) {
        if (line_no++ == 0 && line[0] == '#') continue; /* "#version: 0.2"; later lines may start with '#' */
        char *space = strchr(line, ' ');
        assert_non_null(space);
        if (!first) json[o++] = ',';
        first = 0;
        if (pairs) {
            json[o++] = '[';
            o += put_json_string(json + o, line, (size_t)(space - line));
            json[o++] = ',';
            o += put_json_string(json + o, space + 1, strlen(space + 1));
            json[o++] = ']';
        } else {
            o += put_json_string(json + o, line, strlen(line));
        }
    }
    o += (size_t)sprintf(json + o, "]}}\n");
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_bytes(path, json, o);
    free(json);
    free(bpe);
    free(vocab);
}

static int hex_digit(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

/* Every golden case gives the reference's ids through t; returns the number of cases. */
static int check_golden(const vkg_tokenizer *t) {
    char path[1200];
    snprintf(path, sizeof path, "%s/tokenizer_cases.txt", data_dir);
    char *file = test_read_file(path, NULL);
    int cases = 0;
    char *save = NULL;
    for (char *line = strtok_r(file, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        assert_non_null(tab2);
        *tab1 = *tab2 = '\0';
        size_t len = strlen(tab1 + 1) / 2;
        char *text = malloc(len + 1);
        assert_non_null(text);
        for (size_t i = 0; i < len; i++) text[i] = (char)(hex_digit(tab1[1 + 2 * i]) * 16 + hex_digit(tab1[2 + 2 * i]));
        int32_t *ids = NULL;
        size_t n = 0;
        vkg_error err = {0};
        if (vkg_tokenizer_encode_with(t, text, len, VKG_TOKENIZE_SPLIT_SPECIAL, &ids, &n, &err) != VKG_OK) fail_msg("%s: %s", line, err.message);
        char got[8192] = "";
        size_t used = 0;
        for (size_t i = 0; i < n && used < sizeof got - 16; i++)
            used += (size_t)snprintf(got + used, sizeof got - used, i ? ",%d" : "%d", (int)ids[i]);
        /* tokenizers reads GPT-2's \s as Oniguruma does (Unicode White_Space: U+0085 yes, U+FEFF
         * no), the JavaScript reference the other way round: for these two cases the ids are the
         * tokenizers library's (0.23.2, on this very tokenizer.json). */
        static const char *const onig[][2] = {{"bom_and_nel", "87,171,119,123,65,296,220,126,227,4954"},
                                              {"bom_after_space", "64,27332,119,123,65,28053,254,236,66"}};
        const char *want = tab2 + 1;
        for (int k = 0; k < 2; k++)
            if (!strcmp(line, onig[k][0])) want = onig[k][1];
        if (strcmp(got, want) != 0) fail_msg("case %s: %s, expected %s", line, got, want);
        free(ids);
        free(text);
        cases++;
    }
    free(file);
    return cases;
}

static void test_gpt2_tokenizer_json(void **state) {
    (void)state;
    for (int pairs = 0; pairs < 2; pairs++) {
        const char *dir = in_tmp(pairs ? "tj_pairs" : "tj_strings");
        assert_int_equal(mkdir(dir, 0700), 0);
        write_gpt2_tokenizer_json(dir, pairs);
        vkg_error err = {0};
        vkg_tokenizer *t = NULL;
        if (vkg_tokenizer_load(dir, &t, &err) != VKG_OK) fail_msg("%s", err.message);
        assert_int_equal(vkg_tokenizer_vocab_size(t), 50257);
        assert_int_equal(vkg_tokenizer_eot(t), 50256);
        assert_int_equal(check_golden(t), 72);
        vkg_tokenizer_free(t);
    }
}

/* tokenizer.json wins over vocab.json + merges.txt, as in transformers' AutoTokenizer. */
static void test_precedence(void **state) {
    (void)state;
    const char *dir = in_tmp("tj_both");
    assert_int_equal(mkdir(dir, 0700), 0);
    write_gpt2_tokenizer_json(dir, 0);
    char path[1300];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    write_bytes(path, "not json", 8);
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    write_bytes(path, "x", 1);
    vkg_error err = {0};
    vkg_tokenizer *t = NULL;
    if (vkg_tokenizer_load(dir, &t, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_tokenizer_vocab_size(t), 50257);
    vkg_tokenizer_free(t);
}

static int byte_printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

/* tokenizer.json around a vocabulary of the 256 byte tokens plus extra ("\"he\": 256" or ""):
 * head is put before "model" (e.g. "\"added_tokens\": [...], "), model_extra inside it after
 * the vocab (e.g. ", \"merges\": [\"h e\"]"). */
static char *small_json(const char *head, const char *extra, const char *model_extra) {
    char *json = malloc(256 * 16 + strlen(head) + strlen(extra) + strlen(model_extra) + 128);
    assert_non_null(json);
    size_t used = (size_t)sprintf(json, "{%s\"model\": {\"type\": \"BPE\", \"vocab\": {", head);
    unsigned next_extra = 0x100;
    for (unsigned b = 0; b < 256; b++) {
        unsigned cp = byte_printable(b) ? b : next_extra++;
        used += (size_t)sprintf(json + used, "%s\"", b ? ", " : "");
        if (cp == '"' || cp == '\\') json[used++] = '\\';
        if (cp < 0x80) json[used++] = (char)cp;
        else { json[used++] = (char)(0xC0 | cp >> 6); json[used++] = (char)(0x80 | (cp & 63)); }
        used += (size_t)sprintf(json + used, "\": %u", b);
    }
    sprintf(json + used, "%s%s}%s}}", *extra ? ", " : "", extra, model_extra);
    return json;
}

static vkg_status load_json_text(const char *text, vkg_tokenizer **t, vkg_error *err) {
    static int k;
    char name[32];
    snprintf(name, sizeof name, "tj_small%d", k++);
    const char *dir = in_tmp(name);
    assert_int_equal(mkdir(dir, 0700), 0);
    char path[1300];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_bytes(path, text, strlen(text));
    return vkg_tokenizer_load(dir, t, err);
}

static void expect_error(const char *text, vkg_status want, const char *part) {
    vkg_error err = {0};
    vkg_tokenizer *t = NULL;
    vkg_status st = load_json_text(text, &t, &err);
    assert_null(t);
    if (st != want || !strstr(err.message, part))
        fail_msg("status %s, \"%s\": wanted %s with \"%s\"", vkg_status_name(st), err.message, vkg_status_name(want),
                 part);
    if (!strstr(err.message, "tokenizer.json")) fail_msg("\"%s\" does not name the file", err.message);
}

static void expect_small_error(const char *head, const char *extra, const char *model_extra, vkg_status want,
                               const char *part) {
    char *json = small_json(head, extra, model_extra);
    expect_error(json, want, part);
    free(json);
}

static void test_small_files(void **state) {
    (void)state;
    /* Both merge spellings, and an added token the vocabulary lacks: a new id after it. */
    const char *merges[] = {", \"merges\": [\"h e\"]", ", \"merges\": [[\"h\", \"e\"]]"};
    for (int i = 0; i < 2; i++) {
        char *json = small_json("\"added_tokens\": [{\"id\": 257, \"content\": \"<|endoftext|>\", \"special\": true}], ",
                                "\"he\": 256", merges[i]);
        vkg_error err = {0};
        vkg_tokenizer *t = NULL;
        if (load_json_text(json, &t, &err) != VKG_OK) fail_msg("%s", err.message);
        free(json);
        assert_int_equal(vkg_tokenizer_vocab_size(t), 258);
        assert_int_equal(vkg_tokenizer_eot(t), 257);
        int32_t *ids = NULL;
        size_t n = 0;
        assert_int_equal(vkg_tokenizer_encode(t, "hehe", 4, &ids, &n, &err), VKG_OK);
        assert_int_equal(n, 2);
        assert_int_equal(ids[0], 256);
        assert_int_equal(ids[1], 256);
        free(ids);
        size_t len = 0;
        const char *b = vkg_tokenizer_token_bytes(t, 257, &len);
        assert_int_equal(len, 13);
        assert_memory_equal(b, "<|endoftext|>", 13);
        vkg_tokenizer_free(t);
    }
}

static void test_malformed(void **state) {
    (void)state;
    const char *m = ", \"merges\": []";
    expect_error("[1, 2]", VKG_ERR_FORMAT, "tokenizer.json: expected an object (a tokenizers tokenizer.json), found array");
    expect_error("{\"version\": \"1.0\"}", VKG_ERR_FORMAT, "no \"model\": not a tokenizers tokenizer.json");
    expect_error("{\"model\": [1]}", VKG_ERR_FORMAT, "model is array, expected an object");
    expect_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}", VKG_ERR_UNSUPPORTED,
                 "model.type is \"WordPiece\": vkgraph reads BPE tokenizers only");
    expect_error("{\"model\": {\"type\": 3}}", VKG_ERR_FORMAT, "model.type is number, expected a string");
    expect_error("{\"model\": {\"type\": \"BPE\", \"merges\": []}}", VKG_ERR_FORMAT, "model has no \"vocab\"");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": [\"a\"], \"merges\": []}}", VKG_ERR_FORMAT,
                 "model.vocab: expected an object mapping each token to its id, found array");
    expect_small_error("", "", "", VKG_ERR_FORMAT, "model.merges is missing, expected an array");
    expect_small_error("", "", ", \"merges\": {}", VKG_ERR_FORMAT, "model.merges is object, expected an array");
    expect_small_error("", "\"he\": \"256\"", m, VKG_ERR_FORMAT, "model.vocab: entry 257 (token \"he\"): the id is string");
    expect_small_error("", "", ", \"merges\": [5]", VKG_ERR_FORMAT,
                       "model.merges[0]: expected \"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"], found number");
    expect_small_error("", "", ", \"merges\": [\"h e x\"]", VKG_ERR_FORMAT, "found string \"h e x\"");
    expect_small_error("", "", ", \"merges\": [[\"h\"]]", VKG_ERR_FORMAT, "model.merges[0]: expected");
    expect_small_error("", "\"he\": 256", ", \"merges\": [\"h e\", \"h zz\"]", VKG_ERR_FORMAT,
                       "model.merges[1]: token \"zz\" is not in model.vocab");
    expect_small_error("", "", ", \"merges\": [[\"x\", \"y\"]]", VKG_ERR_FORMAT,
                       "model.merges[0]: merging \"x\" and \"y\" makes a token that is not in model.vocab");
    expect_small_error("\"added_tokens\": \"x\", ", "", m, VKG_ERR_FORMAT, "added_tokens is string, expected an array");
    expect_small_error("\"added_tokens\": [{\"id\": \"1\", \"content\": \"a\"}], ", "", m, VKG_ERR_FORMAT,
                       "added_tokens[0] is not {\"id\": number, \"content\": string}");
    expect_small_error("\"added_tokens\": [{\"id\": 5, \"content\": \"a\"}], ", "", m, VKG_ERR_FORMAT,
                       "added_tokens[0] gives \"a\" id 5, but model.vocab gives it 97");
    expect_small_error("\"added_tokens\": [{\"id\": 300, \"content\": \"<x>\"}], ", "", m, VKG_ERR_FORMAT,
                       "added_tokens[0] (token \"<x>\"): id 300 is not an integer in 0..256");
    /* A component of a type vkgraph does not read is refused by its name. */
    expect_small_error("\"normalizer\": {\"type\": \"BertNormalizer\"}, ", "", m, VKG_ERR_UNSUPPORTED,
                       "normalizer: type \"BertNormalizer\" is not supported");
    expect_small_error("\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
                       "{\"type\": \"StripAccents\"}]}, ", "", m, VKG_ERR_UNSUPPORTED,
                       "normalizer: type \"StripAccents\" is not supported");
    expect_small_error("\"pre_tokenizer\": {\"type\": \"Punctuation\"}, ", "", m, VKG_ERR_UNSUPPORTED,
                       "pre_tokenizer: type \"Punctuation\" is not supported");
    expect_small_error("\"decoder\": {\"type\": \"WordPiece\"}, ", "", m, VKG_ERR_UNSUPPORTED,
                       "decoder: type \"WordPiece\" is not supported");
    expect_small_error("\"post_processor\": {\"type\": \"Nothing\"}, ", "", m, VKG_ERR_UNSUPPORTED,
                       "post_processor: type \"Nothing\" is not supported");
    expect_small_error("\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": "
                       "\"Isolated\"}, ", "", m, VKG_ERR_UNSUPPORTED, "cannot compile the pattern \"(\"");
    expect_small_error("\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": "
                       "\"Sideways\"}, ", "", m, VKG_ERR_UNSUPPORTED, "Split behavior \"Sideways\" is not one of");
    expect_small_error("\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": 3, \"behavior\": \"Isolated\"}, ", "", m,
                       VKG_ERR_FORMAT, "pattern is not {\"String\": ...} or {\"Regex\": ...}");
    expect_small_error("\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
                       "{\"id\": \"<s>\"}}, {\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {}}, ", "", m,
                       VKG_ERR_FORMAT, "single[0] is not a Sequence or a SpecialToken listed in special_tokens");
    expect_small_error("", "", ", \"merges\": [], \"unk_token\": \"<unk>\"", VKG_ERR_FORMAT,
                       "model.unk_token \"<unk>\" is not in model.vocab");
    expect_small_error("", "", ", \"merges\": [], \"continuing_subword_prefix\": \"##\"", VKG_ERR_UNSUPPORTED,
                       "continuing_subword_prefix");
}

/* The command on a folder that holds only tokenizer.json, with the pieces. */
static void test_cli_pieces(void **state) {
    (void)state;
    need_binary();
    const char *dir = in_tmp("tj_cli");
    assert_int_equal(mkdir(dir, 0700), 0);
    write_gpt2_tokenizer_json(dir, 1);
    result r = VKG("tokenize", "-m", dir, "-p", "Hello world's \"x\"\n", "--pieces");
    expect_ok(&r, "tokenize --pieces");
    assert_string_equal(r.out, "[15496, 995, 338, 366, 87, 1, 198]\n"
                               " 15496 -> 'Hello'\n"
                               "   995 -> ' world'\n"
                               "   338 -> \"'s\"\n"
                               "   366 -> ' \"'\n"
                               "    87 -> 'x'\n"
                               "     1 -> '\"'\n"
                               "   198 -> '\\n'\n");
    result_free(&r);
    r = VKG("tokenize", "-m", dir, "--decode=50256,220", "--pieces");
    expect_ok(&r, "tokenize --decode --pieces");
    assert_string_equal(r.out, " 50256 -> '<|endoftext|>'\n   220 -> ' '\n");
    result_free(&r);
    char path[1300];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    const char *unigram = "{\"model\": {\"type\": \"Unigram\"}}";
    write_bytes(path, unigram, strlen(unigram));
    expect_fail(VKG("tokenize", "-m", dir, "-p", "hi"), "tokenize", "model.type is \"Unigram\"");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_tokenizer_json),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_small_files),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_cli_pieces),
    };
    return cmocka_run_group_tests_name("tokenizer.json", tests, setup_all, teardown);
}
