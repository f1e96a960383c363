/* `vkgraph generate` as llama.cpp users run it: the closing summary's counts and times, stop
 * strings (split over tokens, and in the prompt), --ignore-eos, and interactive mode, whose turns
 * must equal one-shot generation of the whole conversation while feeding only the new tokens. */
#include "gpt2_cli_run.h"

#include "io/tokenizer.h"

#include <pty.h>

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The summary's numbers: "vkgraph generate: LABEL  X ms / N ..." lines. */
typedef struct summary {
    double load, prompt, generation, sampling, total;
    long prompt_tokens, passes, decoded, chosen, generated, from_prefill, from_decode;
} summary;

static double ms_after(const char *err, const char *label, long *count) {
    char key[64];
    snprintf(key, sizeof key, "vkgraph generate: %s", label);
    const char *line = test_line_with(err, key);
    if (!line) fail_msg("no '%s' line in: %s", key, err);
    double ms = 0;
    long n = -1;
    int got = sscanf(line + strlen(key), " %lf ms / %ld", &ms, &n);
    if (got < 1 || (count && got < 2)) fail_msg("cannot read '%s'", line);
    if (count) *count = n;
    return ms;
}

static summary parse_summary(const char *err) {
    summary s;
    s.load = ms_after(err, "load:", NULL);
    s.prompt = ms_after(err, "prompt:", &s.prompt_tokens);
    s.generation = ms_after(err, "generation:", &s.decoded);
    s.sampling = ms_after(err, "sampling:", &s.chosen);
    s.total = ms_after(err, "total:", &s.generated);
    const char *p = strstr(test_line_with(err, "vkgraph generate: prompt:"), "tokens in ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "tokens in %ld prefill pass", &s.passes), 1);
    p = strstr(test_line_with(err, "vkgraph generate: total:"), "tokens generated: ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "tokens generated: %ld from a prefill pass's logits, %ld from decode steps",
                            &s.from_prefill, &s.from_decode), 2);
    /* Disjoint phases inside the total; the rounding of four printed numbers aside. */
    assert_true(s.total + 0.05 >= s.load + s.prompt + s.generation + s.sampling);
    assert_int_equal(s.from_prefill + s.from_decode, s.generated);
    return s;
}

/* A model with GPT-2's vocabulary and tokenizer, random weights. */
static const char *text_model(void) {
    static char dir[1200];
    if (dir[0]) return dir;
    snprintf(dir, sizeof dir, "%s", in_tmp("text"));
    result r = VKG("gpt2-random", dir, "--layers", "2", "--heads", "4", "--embd", "32", "--ctx", "64", "--seed", "5");
    expect_ok(&r, "gpt2-random");
    result_free(&r);
    return dir;
}

static int32_t *encode(const char *dir, const char *text, size_t *n) {
    vkg_tokenizer *t = NULL;
    vkg_error err = {0};
    int32_t *ids = NULL;
    assert_int_equal(vkg_tokenizer_load(dir, &t, &err), VKG_OK);
    assert_int_equal(vkg_tokenizer_encode(t, text, strlen(text), &ids, n, &err), VKG_OK);
    vkg_tokenizer_free(t);
    return ids;
}

/* "[1, 2, 3]" from --ids-out into ids, the line's list exactly as tokenize prints it; returns the
 * count. */
static int parse_ids(const char *text, int32_t *ids, int max) {
    int n = 0;
    char *end;
    assert_int_equal(text[0], '[');
    for (const char *p = text + 1; n < max && *p != ']'; p = end) {
        if (n) {
            assert_memory_equal(p, ", ", 2);
            p += 2;
        }
        long v = strtol(p, &end, 10);
        assert_true(end != p);
        ids[n++] = (int32_t)v;
    }
    return n;
}

static void append_csv(char *csv, size_t size, const int32_t *ids, int n) {
    for (int i = 0; i < n; i++) {
        size_t used = strlen(csv);
        snprintf(csv + used, size - used, "%s%d", used ? "," : "", (int)ids[i]);
    }
}

/* ---- the summary --------------------------------------------------------------------------------- */

static void test_summary_counts(void **state) {
    (void)state;
    need_binary();
    /* gpt2-tiny: 3 prompt tokens in one pass; 8 generated, the first from the prompt's logits, so
     * 7 decode steps; 8 choices. */
    result r = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "8", "--device", "cpu");
    expect_ok(&r, "generate");
    summary s = parse_summary(r.err);
    assert_int_equal(s.prompt_tokens, 3);
    assert_int_equal(s.passes, 1);
    assert_int_equal(s.decoded, 7);
    assert_int_equal(s.chosen, 8);
    assert_int_equal(s.generated, 8);
    assert_int_equal(s.from_prefill, 1);
    assert_non_null(strstr(r.err, "ms per token, "));
    /* the cache is sized to the 11 positions the run needs: a choice, not a device's limit */
    assert_null(strstr(r.err, "do not fit"));
    result_free(&r);

    /* One token: no decode step at all.  Zero: nothing chosen. */
    r = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "1", "--device", "cpu");
    expect_ok(&r, "generate -n 1");
    s = parse_summary(r.err);
    assert_int_equal(s.decoded, 0);
    assert_int_equal(s.generated, 1);
    result_free(&r);
    /* Zero: nothing chosen, and no pass over the prompt either (llama.cpp's -n 0); the prompt is
     * printed as it is with any -n. */
    r = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "0", "--device", "cpu");
    expect_ok(&r, "generate -n 0");
    assert_string_equal(r.out, "[17, 301, 5]\n");
    s = parse_summary(r.err);
    assert_int_equal(s.prompt_tokens, 0);
    assert_int_equal(s.passes, 0);
    assert_int_equal(s.chosen + s.decoded + s.generated, 0);
    assert_non_null(strstr(r.err, "vkgraph generate: -n 0: nothing generated, no pass run\n"));
    assert_non_null(strstr(r.err, "(model, tokenizer, device)\n")); /* no plan compiled either */
    result_free(&r);
    expect_fail(VKG("generate", "-m", tiny, "-i", "-n", "0", "--device", "cpu"), "generate",
                "-n 0 with --interactive would answer no line");

    /* Text in: the prompt's tokens as the tokenizer counts them. */
    const char *dir = text_model();
    size_t n;
    int32_t *ids = encode(dir, "The meaning of life is", &n);
    free(ids);
    r = VKG("generate", "-m", dir, "-p", "The meaning of life is", "-n", "6", "--device", "cpu");
    expect_ok(&r, "generate -p");
    s = parse_summary(r.err);
    assert_int_equal(s.prompt_tokens, (long)n);
    assert_int_equal(s.decoded, 5);
    assert_int_equal(s.generated, 6);
    result_free(&r);
}

/* ---- stop strings and --ignore-eos ------------------------------------------------------------------ */

static void test_stop_strings(void **state) {
    (void)state;
    need_binary();
    const char *dir = text_model();
    result ids_run = VKG("generate", "-m", dir, "-p", "Hello there", "-n", "16", "--device", "cpu", "--no-prompt",
                         "--ids-out");
    result text_run = VKG("generate", "-m", dir, "-p", "Hello there", "-n", "16", "--device", "cpu", "--no-prompt");
    expect_ok(&ids_run, "generate --ids-out");
    expect_ok(&text_run, "generate");
    int32_t gen[16];
    assert_int_equal(parse_ids(ids_run.out, gen, 16), 16);
    const char *text = text_run.out; /* the 16 tokens' bytes and a newline */

    /* A stop string made of the end of one token and the start of the next, at the first place
     * where it occurs in the text. */
    vkg_tokenizer *t = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_tokenizer_load(dir, &t, &err), VKG_OK);
    char stop[16] = "";
    size_t at = 0, offset = 0;
    for (int k = 0; k + 1 < 16 && !stop[0]; k++) {
        size_t la, lb;
        const char *a = vkg_tokenizer_token_bytes(t, gen[k], &la), *b = vkg_tokenizer_token_bytes(t, gen[k + 1], &lb);
        offset += la;
        if (la == 0 || lb == 0) continue;
        size_t ta = la < 2 ? la : 2, hb = lb < 2 ? lb : 2;
        snprintf(stop, sizeof stop, "%.*s%.*s", (int)ta, a + la - ta, (int)hb, b);
        const char *first = strstr(text, stop);
        if (strlen(stop) != ta + hb || !first || (size_t)(first - text) != offset - ta) stop[0] = '\0';
        else at = offset - ta;
    }
    vkg_tokenizer_free(t);
    if (!stop[0]) fail_msg("no two tokens to split a stop string over in '%s'", text);

    result r = VKG("generate", "-m", dir, "-p", "Hello there", "-n", "16", "--device", "cpu", "--no-prompt", "--stop",
                   stop);
    expect_ok(&r, "generate --stop");
    char want[512];
    snprintf(want, sizeof want, "%.*s\n", (int)at, text); /* nothing of the stop string, nor after it */
    assert_string_equal(r.out, want);
    assert_non_null(strstr(r.err, "stopped at the stop string '"));
    result_free(&r);

    /* Stop strings that never occur, and one in the prompt only: the whole text. */
    r = VKG("generate", "-m", dir, "-p", "Hello there", "-n", "16", "--device", "cpu", "--no-prompt", "--stop",
            "\x01never", "--stop", "Hello there");
    expect_ok(&r, "generate --stop in the prompt");
    assert_null(strstr(text, "Hello there"));
    assert_string_equal(r.out, text);
    assert_non_null(strstr(r.err, "stopped at the requested number of tokens"));
    result_free(&r);
    result_free(&ids_run);
    result_free(&text_run);

    expect_fail(VKG("generate", "-m", dir, "-p", "Hi", "--stop", "x", "--ids-out"), "generate", "--ids-out");
    expect_fail(VKG("generate", "-m", dir, "-p", "Hi", "--stop", ""), "generate", "empty");
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1,2", "--stop", "x", "--device", "cpu"), "generate",
                "needs a tokenizer");
    expect_fail(VKG("generate", "-m", dir, "-p", "Hi", "--min-p", "2"), "generate", "--min-p 2");
    expect_fail(VKG("generate", "-m", dir, "-p", "Hi", "--repeat-penalty", "0"), "generate", "--repeat-penalty 0");
    expect_fail(VKG("generate", "-m", dir, "-p", "Hi", "--repeat-last-n", "-2"), "generate", "--repeat-last-n");
}

/* --repeat-penalty on greedy choices, with its window; and the same seed, the same text. */
static void test_repeat_penalty(void **state) {
    (void)state;
    need_binary();
    const int32_t prompt[3] = {17, 301, 5};
    int32_t plain[10], whole[10], last1[10];
    result a = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "10", "--device", "cpu", "--no-prompt");
    result b = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "10", "--device", "cpu", "--no-prompt",
                   "--repeat-penalty", "1000", "--repeat-last-n", "-1");
    result c = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "10", "--device", "cpu", "--no-prompt",
                   "--repeat-penalty", "1000", "--repeat-last-n", "1");
    result d = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "10", "--device", "cpu", "--no-prompt",
                   "--repeat-penalty", "1000", "--repeat-last-n", "0");
    expect_ok(&a, "generate");
    expect_ok(&b, "generate --repeat-penalty");
    expect_ok(&c, "generate --repeat-last-n 1");
    expect_ok(&d, "generate --repeat-last-n 0");
    assert_int_equal(parse_ids(a.out, plain, 10), 10);
    assert_int_equal(parse_ids(b.out, whole, 10), 10);
    assert_int_equal(parse_ids(c.out, last1, 10), 10);
    int repeats = 0;
    for (int i = 1; i < 10; i++) repeats += plain[i] == plain[i - 1];
    assert_true(repeats > 0);                        /* greedy alone repeats itself on this model */
    for (int i = 0; i < 10; i++) {
        for (int j = 0; j < 3; j++) assert_int_not_equal(whole[i], prompt[j]); /* the prompt counts */
        for (int j = 0; j < i; j++) assert_int_not_equal(whole[i], whole[j]);
        if (i) assert_int_not_equal(last1[i], last1[i - 1]);
    }
    assert_int_equal(whole[0], plain[0]);           /* the prompt holds no plain[0] */
    assert_string_equal(d.out, a.out);              /* an empty window: no penalty */
    assert_non_null(strstr(b.err, "repetition penalty 1000 over the whole context"));
    result_free(&a);
    result_free(&b);
    result_free(&c);
    result_free(&d);

    /* Every option at once: the same seed gives the same text. */
    const char *dir = text_model();
    result x = VKG("generate", "-m", dir, "-p", "Once upon", "-n", "12", "--device", "cpu", "--temperature", "1.2",
                   "--top-k", "500", "--top-p", "0.95", "--min-p", "0.01", "--repeat-penalty", "1.2", "--seed", "9");
    result y = VKG("generate", "-m", dir, "-p", "Once upon", "-n", "12", "--device", "cpu", "--temperature", "1.2",
                   "--top-k", "500", "--top-p", "0.95", "--min-p", "0.01", "--repeat-penalty", "1.2", "--seed", "9");
    expect_ok(&x, "generate with every option");
    expect_ok(&y, "generate with every option, again");
    assert_string_equal(x.out, y.out);
    assert_non_null(strstr(x.err, "min-p 0.01, seed 9"));
    result_free(&x);
    result_free(&y);
}

/* Replaces the first `from` in dir/config.json by `to`. */
static void edit_config(const char *dir, const char *from, const char *to) {
    char path[1300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = test_read_file(path, NULL);
    char *p = strstr(text, from);
    assert_non_null(p);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fprintf(f, "%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
    fclose(f);
    free(text);
}

static void test_ignore_eos(void **state) {
    (void)state;
    need_binary();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp("eos"));
    result r = VKG("gpt2-random", dir, "--layers", "1", "--heads", "2", "--embd", "16", "--ctx", "32", "--vocab", "53");
    expect_ok(&r, "gpt2-random");
    result_free(&r);
    /* Make the first greedy token the end-of-text token. */
    r = VKG("generate", "-m", dir, "--ids", "3,4", "-n", "1", "--device", "cpu", "--ids-out", "--no-prompt");
    expect_ok(&r, "generate one token");
    assert_int_equal(r.out[0], '[');
    int eos = atoi(r.out + 1);
    result_free(&r);
    char key[64];
    snprintf(key, sizeof key, "\"eos_token_id\": %d", eos);
    edit_config(dir, "\"eos_token_id\": 52", key);
    r = VKG("generate", "-m", dir, "--ids", "3,4", "-n", "6", "--device", "cpu", "--ids-out", "--no-prompt");
    expect_ok(&r, "generate stopping at eos");
    assert_string_equal(r.out, "[]\n"); /* an empty list, still one */
    assert_non_null(strstr(r.err, "stopped at the end-of-text token"));
    summary s = parse_summary(r.err);
    assert_int_equal(s.chosen, 1);
    assert_int_equal(s.generated, 0);
    result_free(&r);

    r = VKG("generate", "-m", dir, "--ids", "3,4", "-n", "6", "--device", "cpu", "--ids-out", "--no-prompt",
            "--ignore-eos");
    expect_ok(&r, "generate --ignore-eos");
    int32_t ids[8];
    assert_int_equal(parse_ids(r.out, ids, 8), 6);
    for (int i = 0; i < 6; i++) assert_int_not_equal(ids[i], eos);
    s = parse_summary(r.err);
    assert_int_equal(s.generated, 6);
    assert_int_equal(s.decoded, 5);
    assert_non_null(strstr(r.err, "stopped at the requested number of tokens"));
    result_free(&r);
}

/* ---- interactive ---------------------------------------------------------------------------------- */

/* Two turns piped in; the second reply must be what one-shot generation gives for the whole
 * conversation, and each turn must feed only its new tokens. */
static void interactive_case(const char *device, const char *env) {
    const char *dir = text_model();
    const char *lines[2] = {"Hello there\n", "How are you\n"};
    char input[64];
    snprintf(input, sizeof input, "%s%s", lines[0], lines[1]);
    write_text(in_tmp("turns.txt"), input);
    result r = run_with_input((const char *const[]){bin, "generate", "-m", dir, "-i", "-n", "5", "--device", device,
                                                    "--ids-out", NULL},
                              in_tmp("turns.txt"), env);
    expect_ok(&r, "generate -i");
    assert_null(strstr(r.err, "Vulkan validation"));
    assert_null(strstr(r.err, "validation requested but"));
    char *second = strchr(r.out, '\n');
    assert_non_null(second);
    int32_t reply1[8], reply2[8];
    assert_int_equal(parse_ids(r.out, reply1, 8), 5);
    assert_int_equal(parse_ids(second + 1, reply2, 8), 5);

    size_t n1, n2;
    int32_t *l1 = encode(dir, lines[0], &n1), *l2 = encode(dir, lines[1], &n2);
    /* The conversation: the start token (no prompt was given), line 1, the reply, line 2. */
    char csv[1024] = "50256";
    append_csv(csv, sizeof csv, l1, (int)n1);
    append_csv(csv, sizeof csv, reply1, 5);
    append_csv(csv, sizeof csv, l2, (int)n2);
    result one = VKG("generate", "-m", dir, "--ids", csv, "-n", "5", "--device", "cpu", "--ids-out", "--no-prompt");
    expect_ok(&one, "one-shot generate of the conversation");
    char want[256];
    snprintf(want, sizeof want, "%s", second + 1);
    assert_string_equal(one.out, want);
    result_free(&one);

    /* Turn 2 feeds the last reply token (not in the cache yet) and line 2's tokens, after the
     * start token, line 1 and the first four reply tokens. */
    char turn2[160];
    snprintf(turn2, sizeof turn2, "line 2: %zu tokens; the conversation now fills %zu of the KV cache's ", n2,
             1 + n1 + 5 + n2);
    if (!strstr(r.err, turn2)) fail_msg("no '%s' in: %s", turn2, r.err);
    summary s = parse_summary(r.err);
    assert_int_equal(s.prompt_tokens, (long)(1 + n1 + 1 + n2));
    assert_int_equal(s.passes, 2);
    assert_int_equal(s.decoded, 8);
    assert_int_equal(s.generated, 10);
    assert_int_equal(s.from_prefill, 2);
    free(l1);
    free(l2);
    result_free(&r);
}

static void test_interactive_cpu(void **state) {
    (void)state;
    need_binary();
    interactive_case("cpu", NULL);

    /* Until the context is full (64 positions), then it says so and stops with exit status 1: the
     * fourth line is not answered, nor read past.  No "> " asks for lines that come from a file. */
    const char *dir = text_model();
    write_text(in_tmp("many.txt"), "one two three four\none two three four\none two three four\none two three four\n"
                                   "five\n");
    result r = run_with_input((const char *const[]){bin, "generate", "-m", dir, "-i", "-n", "20", "--device", "cpu",
                                                    NULL},
                              in_tmp("many.txt"), NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "stopped at the end of the model's context"));
    assert_non_null(strstr(r.err, "vkgraph generate: the model's context is full: line 4 needs 5 positions and 0 of "
                                  "the 64 are free; the conversation stops here and the rest of the input is not "
                                  "read\n"));
    assert_null(strstr(r.err, "line 5"));
    assert_null(strstr(r.err, "> "));
    int replies = 0;
    for (const char *p = r.out; (p = strchr(p, '\n')); p++) replies++;
    assert_int_equal(replies, 3);
    result_free(&r);

    expect_fail(VKG("generate", "-m", tiny, "-i", "--ids", "1", "--device", "cpu"), "generate", "needs a tokenizer");
}

/* On a terminal each line is asked for with "> " on stderr (one before each line, and one before
 * the end of input); the replies on stdout stay as they are. */
static void test_interactive_terminal(void **state) {
    (void)state;
    need_binary();
    const char *dir = text_model();
    int master = -1, slave = -1;
    if (openpty(&master, &slave, NULL, NULL, NULL) != 0) skip(); /* no pseudo-terminals here */
    /* Queued in the terminal's line discipline before the command reads: a line, then the end
     * of input (the EOF character at the start of a line). */
    const char typed[] = "Hello there\n\x04";
    assert_int_equal(write(master, typed, sizeof typed - 1), (ssize_t)(sizeof typed - 1));
    int saved = dup(0);
    assert_true(saved >= 0 && dup2(slave, 0) == 0);
    result r = run((const char *const[]){bin, "generate", "-m", dir, "-i", "-n", "3", "--device", "cpu", "--ids-out",
                                         NULL},
                   NULL);
    assert_true(dup2(saved, 0) == 0);
    close(saved);
    close(slave);
    close(master);
    expect_ok(&r, "generate -i on a terminal");
    assert_non_null(strstr(r.err, "> vkgraph generate: line 1: "));
    assert_non_null(strstr(r.err, "\n> vkgraph generate: "));   /* asked again; then the end */
    assert_null(strstr(r.err, "line 2"));
    int32_t reply[4];
    assert_int_equal(parse_ids(r.out, reply, 4), 3);
    assert_null(strstr(r.out, "> "));
    result_free(&r);
}

/* What --ids-out prints, every option that takes ids reads back: tokenize --decode gives the text
 * that generate prints, and generate --ids the same list; tokenize's own output too. */
static void test_ids_round_trip(void **state) {
    (void)state;
    need_binary();
    const char *dir = text_model();
    result ids = VKG("generate", "-m", dir, "-p", "Hello there", "-n", "5", "--device", "cpu", "--ids-out");
    result text = VKG("generate", "-m", dir, "-p", "Hello there", "-n", "5", "--device", "cpu");
    expect_ok(&ids, "generate --ids-out");
    expect_ok(&text, "generate");
    int32_t got[8];
    assert_int_equal(parse_ids(ids.out, got, 8), 2 + 5); /* the prompt's 2 tokens and 5 more */
    result back = VKG("tokenize", "-m", dir, "--decode", ids.out);
    expect_ok(&back, "tokenize --decode of --ids-out");
    size_t len = strlen(text.out);
    assert_true(len > 0 && text.out[len - 1] == '\n');
    assert_int_equal(strlen(back.out), len - 1);
    assert_memory_equal(back.out, text.out, len - 1);
    result again = VKG("generate", "-m", dir, "--ids", ids.out, "-n", "0", "--device", "cpu", "--ids-out");
    expect_ok(&again, "generate --ids of --ids-out");
    assert_string_equal(again.out, ids.out);
    result tok = VKG("tokenize", "-m", dir, "-p", "Hello there");
    expect_ok(&tok, "tokenize");
    result from_tok = VKG("generate", "-m", dir, "--ids", tok.out, "-n", "5", "--device", "cpu", "--ids-out");
    expect_ok(&from_tok, "generate --ids of tokenize's output");
    assert_string_equal(from_tok.out, ids.out);
    /* spaces between ids, as tokenize --help says */
    char spaced[64];
    snprintf(spaced, sizeof spaced, "%d %d", (int)got[0], (int)got[1]);
    result sp = VKG("generate", "-m", dir, "--ids", spaced, "-n", "5", "--device", "cpu", "--ids-out");
    expect_ok(&sp, "generate --ids with spaces");
    assert_string_equal(sp.out, ids.out);
    result_free(&ids), result_free(&text), result_free(&back), result_free(&again), result_free(&tok);
    result_free(&from_tok), result_free(&sp);
}

/* --ctx N (-c, --ctx-size as llama.cpp spells it) sets the KV cache's positions: the tokens are
 * those of a longer cache until this one is full, then generation says so and stops; a
 * conversation stops at its end.  A prompt it cannot hold, or a cache past the model's context,
 * is refused by name. */
static void test_ctx(void **state) {
    (void)state;
    need_binary();
    const char *dir = text_model();
    result whole = VKG("generate", "-m", dir, "-p", "Hello there", "-n", "6", "--device", "cpu", "--ids-out");
    expect_ok(&whole, "generate");
    int32_t want[16], got[16];
    assert_int_equal(parse_ids(whole.out, want, 16), 2 + 6);
    const char *spellings[] = {"--ctx", "-c", "--ctx-size", "--ctx=6"};
    for (int i = 0; i < 4; i++) {
        const int joined = strchr(spellings[i], '=') != NULL;
        result r = joined ? VKG("generate", "-m", dir, "-p", "Hello there", "-n", "6", "--device", "cpu", "--ids-out",
                                spellings[i])
                          : VKG("generate", "-m", dir, "-p", "Hello there", "-n", "6", "--device", "cpu", "--ids-out",
                                spellings[i], "6");
        expect_ok(&r, spellings[i]);
        /* 6 positions: the prompt's 2 and 4 generated tokens fed back; a 5th comes from the last */
        assert_int_equal(parse_ids(r.out, got, 16), 2 + 5);
        assert_memory_equal(got, want, 7 * sizeof got[0]);
        assert_non_null(strstr(r.err, "stopped at the end of the KV cache (6 of the model's 64 positions)"));
        result_free(&r);
    }
    result_free(&whole);

    write_text(in_tmp("ctx.txt"), "one two three four\none two three four\n");
    result r = run_with_input((const char *const[]){bin, "generate", "-m", dir, "-i", "-n", "20", "--device", "cpu",
                                                    "--ctx", "12", NULL},
                              in_tmp("ctx.txt"), NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "stopped at the end of the KV cache (12 of the model's 64 positions)"));
    assert_non_null(strstr(r.err, "vkgraph generate: the KV cache is full: line 2 needs 5 positions"));
    result_free(&r);

    expect_fail(VKG("generate", "-m", dir, "-p", "Hello there", "--ctx", "1", "--device", "cpu"), "generate",
                "--ctx 1: the prompt's 2 tokens do not fit");
    expect_fail(VKG("generate", "-m", dir, "-p", "Hello there", "--ctx", "65", "--device", "cpu"), "generate",
                "--ctx 65: the model's context holds 64 positions");
    expect_fail(VKG("generate", "-m", dir, "-p", "Hello there", "--ctx", "0", "--device", "cpu"), "generate", "--ctx");
}

/* --seed -1 is llama.cpp's "random seed": the seed chosen is printed, and giving it repeats the
 * run. */
static void test_seed_random(void **state) {
    (void)state;
    need_binary();
    result a = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "8", "--temperature", "1.5", "--seed", "-1",
                   "--device", "cpu");
    expect_ok(&a, "generate --seed -1");
    const char *at = strstr(a.err, ", seed ");
    assert_non_null(at);
    char seed[32];
    assert_int_equal(sscanf(at + 7, "%31[0-9]", seed), 1);
    result b = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "8", "--temperature", "1.5", "-s", seed,
                   "--device", "cpu");
    expect_ok(&b, "generate --seed S");
    assert_string_equal(a.out, b.out);
    char said[64];
    snprintf(said, sizeof said, ", seed %s\n", seed);
    assert_non_null(strstr(b.err, said));
    result_free(&a), result_free(&b);
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1", "--seed", "-2"), "generate",
                "--seed: '-2' is not a whole number of -1 or more");
}

static void test_interactive_vulkan(void **state) {
    (void)state;
    need_binary();
    result probe = VKG("devices");
    int none = probe.status != 0 || !strstr(probe.out, "Vulkan");
    result_free(&probe);
    if (none && getenv("VKG_TEST_ALLOW_NO_VULKAN")) skip();
    interactive_case("vulkan", "VKG_VALIDATION=1");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_counts),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_ignore_eos),
        cmocka_unit_test(test_repeat_penalty),
        cmocka_unit_test(test_interactive_cpu),
        cmocka_unit_test(test_interactive_vulkan),
        cmocka_unit_test(test_interactive_terminal),
        cmocka_unit_test(test_ids_round_trip),
        cmocka_unit_test(test_seed_random),
        cmocka_unit_test(test_ctx),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
