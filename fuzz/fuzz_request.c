/* Request bodies of `vkgraph serve` through its parser (src/server/request.c) with GPT-2's
 * tokenizer and a context of 64: any bytes are either a request within the model's limits (a
 * prompt of 1..n_ctx ids in the vocabulary, room for max_tokens, sampling options the sampler
 * accepts) or a 400 naming what is wrong; never a crash, a leak or a huge allocation.  The same
 * bytes go through /tokenize's and /detokenize's parsers. */
#include "fuzz.h"

#include "server/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vkg_tokenizer *gpt2;
static srv_model_facts facts;

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
    return 0;
}

static void check_error(const srv_error *e) {
    FUZZ_CHECK(e->http_status == 400 || e->http_status == 500);
    FUZZ_CHECK(e->message[0] != 0 && e->type != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!gpt2) LLVMFuzzerInitialize(NULL, NULL);
    const char *body = (const char *)data;
    completion_request r;
    srv_error e;
    if (srv_parse_completion(body, size, &facts, &r, &e) == 0) {
        FUZZ_CHECK(r.n_ids >= 1 && r.n_ids <= facts.n_ctx);
        FUZZ_CHECK(r.max_tokens >= 0 && r.n_ids + r.max_tokens <= facts.n_ctx);
        for (int i = 0; i < r.n_ids; i++) FUZZ_CHECK(r.ids[i] >= 0 && r.ids[i] < facts.n_vocab);
        FUZZ_CHECK(r.n_stops >= 0 && r.n_stops <= SRV_MAX_STOPS);
        for (int i = 0; i < r.n_stops; i++) FUZZ_CHECK(r.stops[i][0] != 0);
        vkg_error err;
        FUZZ_CHECK(vkg_sampling_options_check(&r.sampling, &err) == VKG_OK);
        FUZZ_CHECK(!r.include_usage || r.stream);
        completion_request_free(&r);
    } else {
        check_error(&e);
    }
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
