/* Chat at the scale users run: SmolLM2-135M's shapes (2 of its layers, its 49152-token vocabulary
 * and its real chat template) with a context of 2048 positions, a conversation of long messages
 * that outgrows it.  Every turn feeds exactly the prompt's tokens past those the cache kept, the
 * conversation always leaves room for the reply, the oldest turns are dropped when it would not,
 * and the reply after a drop (the cache truncated and re-fed) equals a from-scratch run over the
 * whole prompt.  Release leg only (the model file is 230 MB). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/test_util.h"
#include "vkgraph_chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CTX = 2048, REPLY = 16 };

typedef test_tokens reply;

static void test_chat_fills_2048(void **state) {
    (void)state;
    char *dir = test_tmpdir("chatscale");
    vkg_random_model_options ro;
    vkg_random_model_options_default(&ro);
    ro.shape = "smollm2-135m";
    ro.n_layer = 2;
    ro.n_positions = CTX;
    vkg_error err = {0};
    if (vkg_random_model_write(dir, &ro, &err) != VKG_OK) fail_msg("%s", err.message);
    char cmd[8192], tok[2048];
    snprintf(tok, sizeof tok, "%s", test_data_path("tokenizers/smollm2/tokenizer.json")); /* one static buffer */
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/tokenizer.json' && cp '%s' '%s/tokenizer_config.json'", tok, dir,
             test_data_path("templates/smollm2.json"), dir);
    assert_int_equal(system(cmd), 0);
    vkg_device *cpu = NULL;
    vkg_device_options dopt = {.quiet = 1};
    vkg_model *m = NULL;
    vkg_context *ctx = NULL;
    vkg_chat_template *tpl = NULL;
    vkg_chat *chat = NULL;
    if (vkg_device_open("cpu", &dopt, &cpu, &err) != VKG_OK || vkg_model_open(dir, cpu, NULL, &m, &err) != VKG_OK)
        fail_msg("%s", err.message);
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.n_ctx = CTX;
    co.n_batch = 512;
    if (vkg_context_new(m, &co, &ctx, &err) != VKG_OK || vkg_chat_template_load(dir, &tpl, &err) != VKG_OK ||
        vkg_chat_new(ctx, tpl, "You answer in one line.", &chat, &err) != VKG_OK)
        fail_msg("%s", err.message);
    char base[4096] = "", message[4200];
    for (int i = 0; i < 30; i++) strcat(base, "Please tell me about trains, ");
    vkg_generate_options go;
    vkg_generate_options_default(&go);
    go.max_tokens = REPLY;
    int dropped_turn = 0;
    reply r = {0};
    vkg_chat_turn_result res = {0};
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    for (int turn = 1; turn <= 40 && !dropped_turn; turn++) {
        snprintf(message, sizeof message, "Question %d. %s", turn, base); /* turns differ: a drop re-feeds */
        size_t common = 0;
        free(prompt);
        if (vkg_chat_prompt(chat, message, &prompt, &n_prompt, &common, &err) != VKG_OK) fail_msg("%s", err.message);
        memset(&r, 0, sizeof r);
        if (vkg_chat_turn(chat, message, &go, test_collect_token, &r, &res, &err) != VKG_OK) fail_msg("turn %d: %s", turn, err.message);
        assert_true(res.prompt_tokens + REPLY <= CTX);
        assert_int_equal(res.fed, res.prompt_tokens - res.reused);
        if (res.dropped) {
            dropped_turn = turn;
            break;
        }
        assert_int_equal(res.prompt_tokens, (int)n_prompt);
        assert_int_equal(res.reused, (int)common);
        assert_true(turn == 1 || res.reused > res.prompt_tokens / 2); /* the cache kept the conversation */
        int n_held = 0;
        const int32_t *held = vkg_context_tokens(ctx, &n_held);
        assert_memory_equal(held, prompt, n_prompt * sizeof *held);
    }
    assert_true(dropped_turn >= 3);
    assert_true(res.fed > res.prompt_tokens / 2); /* the kept turns moved to the front: fed again */
    assert_true(res.prompt_tokens > CTX / 2); /* the kept turns still fill much of the context */
    /* the reply after the drop, against the whole kept prompt fed at once into an empty cache */
    int n_held = 0;
    const int32_t *held = vkg_context_tokens(ctx, &n_held);
    int32_t *kept = malloc((size_t)res.prompt_tokens * sizeof *kept);
    assert_non_null(kept);
    memcpy(kept, held, (size_t)res.prompt_tokens * sizeof *kept);
    vkg_context *fresh = NULL;
    if (vkg_context_new(m, &co, &fresh, &err) != VKG_OK) fail_msg("%s", err.message);
    reply direct = {0};
    go.prompt = kept;
    go.n_prompt = res.prompt_tokens;
    if (vkg_context_generate(fresh, &go, test_collect_token, &direct, NULL, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(direct.n, r.n);
    assert_memory_equal(direct.ids, r.ids, (size_t)r.n * sizeof *r.ids);
    printf("chat at %d positions: the oldest turns dropped at turn %d (%d messages), %d tokens kept, %d re-fed\n",
           CTX, dropped_turn, res.dropped, res.prompt_tokens, res.fed);
    free(kept);
    free(prompt);
    vkg_context_free(fresh);
    vkg_chat_free(chat);
    vkg_chat_template_free(tpl);
    vkg_context_free(ctx);
    vkg_model_free(m);
    vkg_device_free(cpu);
    assert_int_equal(test_remove_tree(dir), 0);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_chat_fills_2048)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
