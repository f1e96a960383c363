/* Text generation with a KV cache, streamed token by token, on the public model API alone.
 *
 *   cc 07_generate.c $(pkg-config --cflags --libs vkgraph) -o generate
 *   ./generate MODEL_DIR [cpu|vulkan] [PROMPT] [TOKENS] [SEED]
 *
 * MODEL_DIR is a Hugging Face GPT-2 folder (config.json, model.safetensors and its tokenizer), or
 * one written by `vkgraph gpt2-random`.  Without SEED the choice is greedy; with it, tokens are
 * sampled (temperature 0.8, top-k 40, top-p 0.95) and the same seed gives the same text.  The
 * continuation goes to standard output as it is produced, the timings to standard error: what
 * `vkgraph generate -m MODEL_DIR -p PROMPT -n TOKENS --no-prompt` prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkgraph_model.h"

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) {
        fprintf(stderr, "error: %s\n", err->message);
        exit(1);
    }
}

/* Called with each token's text as soon as it is chosen. */
static int print_token(void *user, int32_t id, const char *text, size_t len) {
    (void)user;
    (void)id;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0; /* nonzero would stop the generation */
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR [cpu|vulkan] [PROMPT] [TOKENS] [SEED]\n", argv[0]);
        return 1;
    }
    const char *dir = argv[1], *device = argc > 2 ? argv[2] : NULL;
    const char *prompt = argc > 3 ? argv[3] : "The meaning of life is";
    const int tokens = argc > 4 ? atoi(argv[4]) : 20;
    vkg_error err = {0};

    vkg_device *dev = NULL;
    check(vkg_device_open(device, NULL, &dev, &err), &err);
    vkg_model *model = NULL;
    check(vkg_model_open(dir, dev, NULL, &model, &err), &err);
    vkg_model_info info;
    check(vkg_model_get_info(model, &info, &err), &err);
    fprintf(stderr, "%s: %d layers, %d heads, %d wide, context %d, %d tokens, %lld parameters, on %s\n",
            info.architecture, info.n_layer, info.n_head, info.n_embd, info.n_ctx, info.n_vocab,
            (long long)info.n_params, vkg_device_name(dev));
    const vkg_tokenizer *tok = vkg_model_tokenizer(model);
    if (!tok) {
        fprintf(stderr, "error: %s has no tokenizer files\n", dir);
        return 1;
    }

    int32_t *ids = NULL;
    size_t n = 0;
    check(vkg_tokenizer_encode(tok, prompt, strlen(prompt), &ids, &n, &err), &err);

    /* A cache for the prompt and what follows, within the model's context. */
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.n_ctx = (int)n + tokens < info.n_ctx ? (int)n + tokens : info.n_ctx;
    vkg_context *ctx = NULL;
    check(vkg_context_new(model, &co, &ctx, &err), &err);

    vkg_generate_options go;
    vkg_generate_options_default(&go); /* greedy */
    go.max_tokens = tokens;
    go.prompt = ids; /* fed first, in one prefill pass */
    go.n_prompt = (int)n;
    if (argc > 5) {
        go.sampling.temperature = 0.8f;
        go.sampling.top_k = 40;
        go.sampling.top_p = 0.95f;
        go.sampling.seed = strtoull(argv[5], NULL, 10);
    }
    vkg_generate_result res;
    check(vkg_context_generate(ctx, &go, print_token, NULL, &res, &err), &err);
    printf("\n");

    static const char *const why[] = {"the requested number of tokens", "the end-of-text token", "a stop string",
                                      "the end of the context", "the callback"};
    vkg_context_timings t;
    check(vkg_context_get_timings(ctx, &t, &err), &err);
    fprintf(stderr, "%d tokens, stopped at %s; prompt %.2f ms (%ld tokens), decode %.2f ms (%ld steps), "
            "sampling %.2f ms\n", res.generated, why[res.reason], 1e3 * t.prefill_s, t.prefill_tokens,
            1e3 * t.decode_s, t.decode_steps, 1e3 * t.sample_s);

    free(ids);
    vkg_context_free(ctx);
    vkg_model_free(model);
    vkg_device_free(dev);
    return 0;
}
