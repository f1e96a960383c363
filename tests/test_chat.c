/* Chat (vkgraph_chat.h and `vkgraph chat`) on a random Llama model with SmolLM2's test tokenizer
 * and SmolLM2's real chat template beside it: each turn feeds exactly the tokens of the
 * re-rendered conversation past those the cache shares with it (the rendering and tokenizing
 * done here independently of the chat, with the template API and the tokenizer); a turn's
 * greedy reply equals a from-scratch run over the whole rendered conversation; stop ids end a
 * reply; a conversation that outgrows the context drops its oldest turns and says so; a message
 * too long alone is refused and the conversation kept; /clear; a model without a template is
 * refused naming the key. */
#include "gpt2_cli_run.h"

#include "vkgraph_chat.h"

static vkg_device *cpu;
static char model[1300];

/* A random llama-tiny model with a vocabulary of 384 (SmolLM2's test tokenizer uses 326 ids),
 * that tokenizer, and SmolLM2-Instruct's tokenizer_config.json (its chat template). */
static int chat_setup(void **state) {
    if (setup(state)) return -1;
    vkg_device_options co = {.quiet = 1};
    vkg_error err = {0};
    if (vkg_device_open("cpu", &co, &cpu, &err) != VKG_OK) return -1;
    snprintf(model, sizeof model, "%s/model", tmp);
    vkg_random_model_options o;
    vkg_random_model_options_default(&o);
    o.vocab_size = 384;
    if (vkg_random_model_write(model, &o, &err) != VKG_OK) return -1;
    char cmd[6000];
    snprintf(cmd, sizeof cmd, "cp '%s/tokenizers/smollm2/tokenizer.json' '%s/' && cp '%s/templates/smollm2.json' "
             "'%s/tokenizer_config.json'", data_dir, model, data_dir, model);
    return system(cmd) == 0 ? 0 : -1;
}

static int chat_teardown(void **state) {
    vkg_device_free(cpu);
    return teardown(state);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void set_generation_config(const char *json) {
    char path[1400];
    snprintf(path, sizeof path, "%s/generation_config.json", model);
    if (json) write_file(path, json);
    else unlink(path);
}

typedef struct opened {
    vkg_model *m;
    vkg_context *ctx;
    vkg_chat_template *tpl;
    vkg_chat *chat;
} opened;

static opened open_chat(int n_ctx, const char *system) {
    opened o = {0};
    vkg_error err = {0};
    if (vkg_model_open(model, cpu, NULL, &o.m, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.n_ctx = n_ctx;
    if (vkg_context_new(o.m, &co, &o.ctx, &err) != VKG_OK) fail_msg("%s", err.message);
    if (vkg_chat_template_load(model, &o.tpl, &err) != VKG_OK) fail_msg("%s", err.message);
    if (vkg_chat_new(o.ctx, o.tpl, system, &o.chat, &err) != VKG_OK) fail_msg("%s", err.message);
    return o;
}

static void close_chat(opened *o) {
    vkg_chat_free(o->chat);
    vkg_context_free(o->ctx);
    vkg_chat_template_free(o->tpl);
    vkg_model_free(o->m);
}

typedef test_tokens reply;

static vkg_generate_options greedy(int max_tokens) {
    vkg_generate_options go;
    vkg_generate_options_default(&go);
    go.max_tokens = max_tokens;
    return go;
}

/* The conversation's prompt rendered and tokenized here, from the chat's messages and one more
 * user message: the template API renders the JSON written here, and the tokenizer reads the
 * text with special tokens recognized and none added. */
static int32_t *expected_prompt(const opened *o, const char *user_text, size_t *n) {
    char json[16384];
    size_t at = 0;
    at += (size_t)snprintf(json + at, sizeof json - at, "[");
    const int count = vkg_chat_count(o->chat);
    for (int i = 0; i <= count; i++) {
        const char *role = "user";
        const char *text = i < count ? vkg_chat_message(o->chat, i, &role) : user_text;
        if (!text) continue;
        at += (size_t)snprintf(json + at, sizeof json - at, "%s{\"role\": \"%s\", \"content\": \"", i ? ", " : "", role);
        for (const char *p = text; *p; p++) {
            if (*p == '"' || *p == '\\') json[at++] = '\\', json[at++] = *p;
            else if ((unsigned char)*p < 0x20) at += (size_t)snprintf(json + at, sizeof json - at, "\\u%04x", *p);
            else json[at++] = *p;
        }
        at += (size_t)snprintf(json + at, sizeof json - at, "\"}");
        assert_true(at < sizeof json - 64);
    }
    at += (size_t)snprintf(json + at, sizeof json - at, "]");
    vkg_chat_render_options ro = {.add_generation_prompt = 1};
    char *text = NULL;
    size_t len = 0;
    vkg_error err = {0};
    if (vkg_chat_template_render(o->tpl, json, at, &ro, &text, &len, &err) != VKG_OK) fail_msg("%s", err.message);
    int32_t *ids = NULL;
    if (vkg_tokenizer_encode_with(vkg_model_tokenizer(o->m), text, len, VKG_TOKENIZE_NO_SPECIAL, &ids, n, &err) != VKG_OK)
        fail_msg("%s", err.message);
    free(text);
    return ids;
}

/* How many of ids the context holds at its start (its cache, not the pending token). */
static size_t cached_prefix(const opened *o, const int32_t *held, int n_held, const int32_t *ids, size_t n) {
    size_t k = 0;
    (void)o;
    while (k < n - 1 && k < (size_t)n_held && held[k] == ids[k]) k++;
    return k;
}

/* One turn, checked: it feeds exactly the re-rendering's tokens past the prefix the cache
 * holds, and afterwards the context starts with the whole rendering. */
static vkg_chat_turn_result checked_turn_prompt(opened *o, const char *text, int max_tokens, reply *r, int32_t **prompt,
                                                size_t *n_prompt) {
    size_t n = 0;
    int32_t *want = expected_prompt(o, text, &n);
    int n_held = 0;
    const int32_t *ctx_ids = vkg_context_tokens(o->ctx, &n_held);
    const int cached = vkg_context_length(o->ctx);
    int32_t *held = malloc(((size_t)n_held + 1) * sizeof *held);
    assert_non_null(held);
    memcpy(held, ctx_ids, (size_t)n_held * sizeof *held);
    const size_t common = cached_prefix(o, held, cached, want, n);
    /* the library's own account agrees, before anything runs */
    int32_t *ids = NULL;
    size_t n2 = 0, common2 = 0;
    vkg_error err = {0};
    if (vkg_chat_prompt(o->chat, text, &ids, &n2, &common2, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(n2, n);
    assert_memory_equal(ids, want, n * sizeof *ids);
    assert_int_equal(common2, common);
    free(ids);
    vkg_chat_turn_result res;
    memset(r, 0, sizeof *r);
    vkg_generate_options go = greedy(max_tokens);
    if (vkg_chat_turn(o->chat, text, &go, test_collect_token, r, &res, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(res.dropped, 0);
    assert_int_equal(res.prompt_tokens, (int)n);
    assert_int_equal(res.reused, (int)common);
    assert_int_equal(res.fed, (int)(n - common));
    int n_now = 0;
    const int32_t *now = vkg_context_tokens(o->ctx, &n_now);
    assert_true((size_t)n_now >= n);
    assert_memory_equal(now, want, n * sizeof *now);
    assert_memory_equal(now + n, r->ids, (size_t)(n_now - (int)n) * sizeof *now); /* then the reply */
    free(held);
    if (prompt) *prompt = want, *n_prompt = n;
    else free(want);
    return res;
}

static vkg_chat_turn_result checked_turn(opened *o, const char *text, int max_tokens, reply *r) {
    return checked_turn_prompt(o, text, max_tokens, r, NULL, NULL);
}

/* Turns feed only the new tokens, and a turn's reply equals a fresh run over its whole prompt. */
static void test_turns_feed_the_suffix(void **state) {
    (void)state;
    set_generation_config(NULL);
    opened o = open_chat(512, "You are terse.");
    reply r1, r2, r3;
    vkg_chat_turn_result res = checked_turn(&o, "Hello there!", 6, &r1);
    assert_int_equal(res.reused, 0);
    assert_int_equal(r1.n, 6);
    assert_int_equal(vkg_chat_count(o.chat), 3);
    const char *role = NULL;
    assert_string_equal(vkg_chat_message(o.chat, 0, &role), "You are terse.");
    assert_string_equal(role, "system");
    assert_non_null(vkg_chat_message(o.chat, 2, &role));
    assert_string_equal(role, "assistant");
    int32_t *p2 = NULL;
    size_t n2 = 0;
    res = checked_turn_prompt(&o, "What is 2+2?\nSay it \"plainly\".", 6, &r2, &p2, &n2);
    assert_true(res.reused > 20); /* the first turn's prompt stayed in the cache */
    assert_true(res.fed < res.prompt_tokens);
    /* the second turn's whole prompt, fed at once into an empty context: the same reply */
    vkg_context *scratch = NULL;
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.n_ctx = 512;
    vkg_error err = {0};
    if (vkg_context_new(o.m, &co, &scratch, &err) != VKG_OK) fail_msg("%s", err.message);
    reply direct;
    memset(&direct, 0, sizeof direct);
    vkg_generate_options go = greedy(6);
    go.prompt = p2;
    go.n_prompt = (int)n2;
    if (vkg_context_generate(scratch, &go, test_collect_token, &direct, NULL, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(direct.n, r2.n);
    assert_memory_equal(direct.ids, r2.ids, (size_t)r2.n * sizeof *r2.ids);
    vkg_context_free(scratch);
    free(p2);
    /* a third turn still feeds only its suffix */
    res = checked_turn(&o, "Thanks.", 4, &r3);
    assert_true(res.reused > 40);
    close_chat(&o);
}

/* A reply ends at any of the model's stop ids (generation_config.json's list), not kept. */
static void test_stop_ids_end_the_reply(void **state) {
    (void)state;
    set_generation_config("{\"eos_token_id\": [325]}");
    opened o = open_chat(512, NULL);
    reply r;
    vkg_chat_turn_result res = checked_turn(&o, "Hi", 5, &r);
    close_chat(&o);
    assert_int_equal(res.gen.reason, VKG_STOP_MAX_TOKENS);
    assert_true(r.n >= 3);
    char json[96];
    snprintf(json, sizeof json, "{\"eos_token_id\": [325, %d]}", (int)r.ids[2]);
    set_generation_config(json);
    o = open_chat(512, NULL);
    reply stopped;
    res = checked_turn(&o, "Hi", 5, &stopped);
    int first = 0;
    while (first < 2 && r.ids[first] != r.ids[2]) first++; /* the id may come earlier too */
    assert_int_equal(res.gen.reason, VKG_STOP_EOS);
    assert_int_equal(stopped.n, first);
    assert_memory_equal(stopped.ids, r.ids, (size_t)first * sizeof *r.ids);
    /* the reply's text (without the stop id) is the assistant's message */
    const char *role = NULL;
    const char *text = vkg_chat_message(o.chat, 1, &role);
    assert_string_equal(role, "assistant");
    char *decoded = NULL;
    size_t len = 0;
    vkg_error err = {0};
    if (first) assert_int_equal(vkg_tokenizer_decode(vkg_model_tokenizer(o.m), r.ids, (size_t)first, &decoded, &len, &err), VKG_OK);
    assert_string_equal(text, first ? decoded : "");
    free(decoded);
    close_chat(&o);
    set_generation_config(NULL);
}

/* Outgrowing the context drops the oldest turns (the system message kept); a message too long
 * alone is refused and the conversation left as it was; clearing keeps the system message. */
static void test_overflow_and_clear(void **state) {
    (void)state;
    set_generation_config(NULL);
    opened o = open_chat(96, "Be brief.");
    vkg_generate_options go = greedy(8); /* room kept for a reply: min(8, 96 / 4) = 8 */
    vkg_chat_turn_result res;
    vkg_error err = {0};
    int dropped_at = 0;
    for (int turn = 1; turn <= 12 && !dropped_at; turn++) {
        reply r;
        memset(&r, 0, sizeof r);
        if (vkg_chat_turn(o.chat, "Tell me more about it", &go, test_collect_token, &r, &res, &err) != VKG_OK)
            fail_msg("turn %d: %s", turn, err.message);
        assert_true(res.prompt_tokens + 8 <= 96);
        if (res.dropped) dropped_at = turn;
    }
    assert_true(dropped_at >= 2);
    assert_true(res.dropped >= 2);
    const char *role = NULL;
    assert_string_equal(vkg_chat_message(o.chat, 0, &role), "Be brief.");
    assert_string_equal(role, "system");
    vkg_chat_message(o.chat, 1, &role);
    assert_string_equal(role, "user");
    /* the kept messages are the latest turns: user, assistant, ..., the new user and its reply */
    assert_int_equal(vkg_chat_count(o.chat) % 2, 1);
    assert_true(vkg_chat_count(o.chat) < 2 * dropped_at + 1);
    /* after the drop the context holds the re-fed rendering */
    int n_held = 0;
    vkg_context_tokens(o.ctx, &n_held);
    assert_true(n_held <= 96);

    /* a message that cannot fit even alone: refused, the conversation unchanged */
    const int before = vkg_chat_count(o.chat);
    char *kept = strdup(vkg_chat_message(o.chat, before - 1, NULL));
    char longer[2048];
    memset(longer, 0, sizeof longer);
    for (int i = 0; i < 60; i++) strcat(longer, "word ");
    reply r;
    memset(&r, 0, sizeof r);
    assert_int_equal(vkg_chat_turn(o.chat, longer, &go, test_collect_token, &r, &res, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "does not fit the context"));
    assert_non_null(strstr(err.message, "96"));
    assert_int_equal(r.n, 0);
    assert_int_equal(res.dropped, 0);
    assert_int_equal(vkg_chat_count(o.chat), before);
    assert_string_equal(vkg_chat_message(o.chat, before - 1, NULL), kept);
    free(kept);

    /* /clear: the system message stays, the context is empty, the next turn feeds from 0 */
    assert_int_equal(vkg_chat_clear(o.chat, &err), VKG_OK);
    assert_int_equal(vkg_chat_count(o.chat), 1);
    assert_int_equal(vkg_context_length(o.ctx), 0);
    res = checked_turn(&o, "Hello again", 4, &r);
    assert_int_equal(res.reused, 0);
    close_chat(&o);
}

/* `vkgraph chat` scripted through standard input: one reply line per message, /clear, /exit;
 * stop ids, overflow and refusal said on stderr; a model without a template refused. */
static void test_cli(void **state) {
    (void)state;
    need_binary();
    set_generation_config("{\"eos_token_id\": [325], \"max_new_tokens\": 5, \"num_beams\": 3}");
    const char *input = in_tmp("input.txt");
    write_file(input, "Hi\n/clear\nHello\n/exit\nnot read\n");
    result r = run_with_input((const char *const[]){bin, "chat", "-m", model, "--device", "cpu", "--system", "Be brief.",
                                                    NULL}, input, NULL);
    expect_ok(&r, "chat");
    int lines = 0;
    for (const char *p = r.out; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 2);
    assert_non_null(strstr(r.err, "conversation cleared (the system message kept)"));
    assert_non_null(strstr(r.err, "message 1: "));
    assert_non_null(strstr(r.err, "message 2: "));
    assert_null(strstr(r.err, "message 3: "));
    assert_non_null(strstr(r.err, "not applied: num_beams 3"));
    assert_non_null(strstr(r.err, "0 already in the cache")); /* after /clear */
    assert_non_null(strstr(r.err, "reply of 5 tokens ended at the token limit"));
    assert_null(strstr(r.out, "> ")); /* no prompt marker when stdin is not a terminal */
    result_free(&r);

    /* a small context (-c, llama.cpp's spelling of --ctx): the oldest turns dropped, with a
     * message; a long line refused, exit 1 */
    char script[4096] = "";
    for (int i = 0; i < 8; i++) strcat(script, "Tell me more about it\n");
    for (int i = 0; i < 60; i++) strcat(script, "word ");
    strcat(script, "\nLast one\n");
    write_file(input, script);
    r = run_with_input((const char *const[]){bin, "chat", "-m", model, "--device", "cpu", "-c", "96", "-n", "8",
                                             "--system", "Be brief.", NULL}, input, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "outgrew the context (96 positions): dropped the oldest"));
    assert_non_null(strstr(r.err, "message 9 refused: this message does not fit the context"));
    assert_non_null(strstr(r.err, "message 10: ")); /* the chat went on */
    result_free(&r);
    /* without -c, generation_config.json's max_length where shorter than the model's context */
    set_generation_config("{\"max_length\": 96}");
    r = run_with_input((const char *const[]){bin, "chat", "-m", model, "--device", "cpu", "-n", "8", "--system",
                                             "Be brief.", NULL}, input, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "outgrew the context (96 positions): dropped the oldest"));
    assert_null(strstr(r.err, "max_length of 96")); /* the CPU holds all of it: no note */
    result_free(&r);
    set_generation_config(NULL);

    /* generation_config.json's stop id: the reply ends there, unless --ignore-eos */
    set_generation_config(NULL);
    opened o = open_chat(512, "Be brief.");
    reply first;
    memset(&first, 0, sizeof first);
    vkg_generate_options go = greedy(1);
    vkg_error err = {0};
    if (vkg_chat_turn(o.chat, "Hi", &go, test_collect_token, &first, NULL, &err) != VKG_OK) fail_msg("%s", err.message);
    close_chat(&o);
    assert_int_equal(first.n, 1);
    char json[64];
    snprintf(json, sizeof json, "{\"eos_token_id\": %d}", (int)first.ids[0]);
    set_generation_config(json);
    write_file(input, "Hi\n");
    r = run_with_input((const char *const[]){bin, "chat", "-m", model, "--device", "cpu", "--system", "Be brief.",
                                             NULL}, input, NULL);
    expect_ok(&r, "chat");
    assert_non_null(strstr(r.err, "reply of 0 tokens ended at a stop id"));
    assert_string_equal(r.out, "\n");
    result_free(&r);
    r = run_with_input((const char *const[]){bin, "chat", "-m", model, "--device", "cpu", "--system", "Be brief.",
                                             "--ignore-eos", "-n", "4", NULL}, input, NULL);
    expect_ok(&r, "chat");
    assert_non_null(strstr(r.err, "reply of 4 tokens ended at the token limit"));
    result_free(&r);
    set_generation_config(NULL);

    /* no chat template: refused before the model loads, naming the key */
    char cfg[1400];
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", model);
    char *saved = test_read_file(cfg, NULL);
    write_file(cfg, "{\"bos_token\": \"<|im_start|>\", \"eos_token\": \"<|im_end|>\"}");
    expect_fail(run_with_input((const char *const[]){bin, "chat", "-m", model, "--device", "cpu", NULL}, input, NULL),
                "chat", "\"chat_template\"");
    unlink(cfg);
    expect_fail(run_with_input((const char *const[]){bin, "chat", "-m", model, "--device", "cpu", NULL}, input, NULL),
                "chat", "tokenizer_config.json");
    write_file(cfg, saved);
    free(saved);
    expect_fail(VKG("chat", "-m", model, "-p", "hi"), "chat", "standard input");
    expect_fail(VKG("chat", "-m", model, "-n", "0"), "chat", "-n 0");
}

/* Llama 3.2's template writes <|begin_of_text|> itself and Llama 3's tokenizer adds it too: the
 * chat's tokens hold it once (apply_chat_template(tokenize=True)), where the plain encoding of
 * the same text would hold it twice. */
static void test_no_second_bos(void **state) {
    (void)state;
    char dir[1400], cmd[12000];
    snprintf(dir, sizeof dir, "%s/llama3", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s'/config.json '%s'/model.safetensors '%s/' && cp "
             "'%s/tokenizers/llama3/tokenizer.json' '%s/' && cp '%s/templates/llama3.2.json' '%s/tokenizer_config.json'",
             dir, model, model, dir, data_dir, dir, data_dir, dir);
    assert_int_equal(system(cmd), 0);
    vkg_model *m = NULL;
    vkg_context *ctx = NULL;
    vkg_chat_template *t = NULL;
    vkg_chat *chat = NULL;
    vkg_error err = {0};
    if (vkg_model_open(dir, cpu, NULL, &m, &err) != VKG_OK || vkg_context_new(m, NULL, &ctx, &err) != VKG_OK ||
        vkg_chat_template_load(dir, &t, &err) != VKG_OK || vkg_chat_new(ctx, t, "Be brief.", &chat, &err) != VKG_OK)
        fail_msg("%s", err.message);
    const vkg_tokenizer *tok = vkg_model_tokenizer(m);
    int32_t *bos = NULL, *ids = NULL, *plain = NULL;
    size_t n_bos = 0, n = 0, common = 0, n_plain = 0;
    assert_int_equal(vkg_tokenizer_encode_with(tok, "<|begin_of_text|>", 17, VKG_TOKENIZE_NO_SPECIAL, &bos, &n_bos, &err),
                     VKG_OK);
    assert_int_equal(n_bos, 1);
    assert_int_equal(vkg_chat_prompt(chat, "Hi", &ids, &n, &common, &err), VKG_OK);
    int count = 0;
    for (size_t i = 0; i < n; i++) count += ids[i] == bos[0];
    assert_int_equal(ids[0], bos[0]);
    assert_int_equal(count, 1);
    assert_int_equal(common, 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(vkg_tokenizer_decode(tok, ids, n, &text, &len, &err), VKG_OK);
    assert_int_equal(vkg_tokenizer_encode(tok, text, len, &plain, &n_plain, &err), VKG_OK);
    assert_int_equal(n_plain, n + 1);
    assert_int_equal(plain[0], bos[0]);
    assert_int_equal(plain[1], bos[0]);
    free(text);
    free(plain);
    free(ids);
    free(bos);
    vkg_chat_free(chat);
    vkg_chat_template_free(t);
    vkg_context_free(ctx);
    vkg_model_free(m);
}

/* generate --chat: the prompt as one user message through the template; the same tokens as the
 * chat's first turn without a system message. */
static void test_generate_chat(void **state) {
    (void)state;
    need_binary();
    set_generation_config(NULL);
    opened o = open_chat(512, NULL);
    reply r;
    memset(&r, 0, sizeof r);
    vkg_generate_options go = greedy(4);
    vkg_error err = {0};
    if (vkg_chat_turn(o.chat, "Hi there", &go, test_collect_token, &r, NULL, &err) != VKG_OK) fail_msg("%s", err.message);
    close_chat(&o);
    char want[256] = "[";
    for (int i = 0; i < r.n; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? ", " : "", (int)r.ids[i]);
    strcat(want, "]\n");
    result res = VKG("generate", "-m", model, "--device", "cpu", "--chat", "-p", "Hi there", "-n", "4", "--ids-out");
    expect_ok(&res, "generate --chat");
    assert_string_equal(res.out, want);
    result_free(&res);
    expect_fail(VKG("generate", "-m", model, "--chat", "-i"), "generate", "vkgraph chat");
    expect_fail(VKG("generate", "-m", data_dir, "--chat", "-p", "x"), "generate", "\"chat_template\"");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_turns_feed_the_suffix),
        cmocka_unit_test(test_stop_ids_end_the_reply),
        cmocka_unit_test(test_overflow_and_clear),
        cmocka_unit_test(test_no_second_bos),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_generate_chat),
    };
    return cmocka_run_group_tests(tests, chat_setup, chat_teardown);
}
