/* Request bodies of `vkgraph serve` through its parser (src/server/request.c) with GPT-2's
 * tokenizer and a context of 64: any bytes are either a request within the model's limits (a
 * prompt of 1..n_ctx ids in the vocabulary, room for max_tokens, sampling options the sampler
 * accepts, logprobs within OpenAI's limit, a logit_bias of distinct ids in the vocabulary) or a
 * 400 naming what is wrong; never a crash, a leak or a huge allocation.  The same
 * bytes go through /tokenize's and /detokenize's parsers, and through the chat completions'
 * parser (src/server/chat_prompt.c) with SmolLM2's test tokenizer and chat template. */
#include "fuzz.h"

#include "server/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vkg_tokenizer *gpt2, *smol;
static vkg_chat_template *smol_template;
static srv_model_facts facts, chat_facts;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    vkg_error err;
    if (vkg_tokenizer_load(VKG_FUZZ_TOKENIZER_DIR, &gpt2, &err) != VKG_OK) {
        fprintf(stderr, "fuzz_request: %s\n", err.message);
        abort();
    }
    facts.tok = gpt2;
    facts.n_ctx = 64;
    facts.n_vocab = vkg_tokenizer_vocab_size(gpt2);
    facts.bos = facts.eos = vkg_tokenizer_eot(gpt2);
    if (vkg_tokenizer_load(VKG_FUZZ_TEST_DATA "/tokenizers/smollm2", &smol, &err) != VKG_OK ||
        vkg_chat_template_load(VKG_FUZZ_TEST_DATA "/templates/smollm2.json", &smol_template, &err) != VKG_OK) {
        fprintf(stderr, "fuzz_request: %s\n", err.message);
        abort();
    }
    chat_facts.tok = smol;
    chat_facts.n_ctx = 64;
    chat_facts.n_vocab = vkg_tokenizer_vocab_size(smol);
    chat_facts.bos = 324;
    chat_facts.eos = 325;
    chat_facts.chat = smol_template;
    return 0;
}

static void check_error(const srv_error *e) {
    FUZZ_CHECK(e->http_status == 400 || e->http_status == 500);
    FUZZ_CHECK(e->message[0] != 0 && e->type != NULL);
}

/* A parsed request is one the engine can run within the model's limits. */
static void check_request(completion_request *r, const srv_model_facts *m) {
    FUZZ_CHECK(r->n_ids >= 1 && r->n_ids <= m->n_ctx);
    FUZZ_CHECK(r->max_tokens >= 0 && r->n_ids + r->max_tokens <= m->n_ctx);
    for (int i = 0; i < r->n_ids; i++) FUZZ_CHECK(r->ids[i] >= 0 && r->ids[i] < m->n_vocab);
    FUZZ_CHECK(r->n_stops >= 0 && r->n_stops <= SRV_MAX_STOPS);
    for (int i = 0; i < r->n_stops; i++) FUZZ_CHECK(r->stops[i][0] != 0);
    vkg_error err;
    FUZZ_CHECK(vkg_sampling_options_check(&r->sampling, &err) == VKG_OK);
    FUZZ_CHECK(!r->include_usage || r->stream);
    FUZZ_CHECK(r->logprobs >= -1 && r->logprobs <= SRV_MAX_TOP_LOGPROBS);
    FUZZ_CHECK(r->echo || !r->echo_text);
    FUZZ_CHECK(r->n_bias >= 0 && r->n_bias <= SRV_MAX_LOGIT_BIAS);
    for (int i = 0; i < r->n_bias; i++) {
        FUZZ_CHECK(r->bias_ids[i] >= 0 && r->bias_ids[i] < m->n_vocab && r->bias[i] >= -100 && r->bias[i] <= 100);
        for (int k = 0; k < i; k++) FUZZ_CHECK(r->bias_ids[k] != r->bias_ids[i]); /* one bias a token */
    }
    completion_request_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!gpt2) LLVMFuzzerInitialize(NULL, NULL);
    const char *body = (const char *)data;
    completion_request r;
    srv_error e;
    if (srv_parse_completion(body, size, &facts, &r, &e) == 0) check_request(&r, &facts);
    else check_error(&e);
    if (srv_parse_chat(body, size, &chat_facts, &r, &e) == 0) check_request(&r, &chat_facts);
    else check_error(&e);
    int32_t *ids;
    size_t n;
    if (srv_parse_tokenize(body, size, &facts, &ids, &n, &e) == 0) free(ids);
    else check_error(&e);
    if (srv_parse_detokenize(body, size, &facts, &ids, &n, &e) == 0) {
        for (size_t i = 0; i < n; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < facts.n_vocab);
        free(ids);
    } else {
        check_error(&e);
    }
    return 0;
}
