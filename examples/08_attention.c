/* Reading one layer's attention from a GPT-2 model, on the public model API alone.
 *
 *   cc 08_attention.c $(pkg-config --cflags --libs vkgraph) -o attention
 *   ./attention MODEL_DIR [cpu|vulkan] [PROMPT] [LAYER] [OUT.npy]
 *
 * Runs the prompt through the model once and prints, for every head of layer LAYER (an index
 * from 0), the earlier token the last token attends to most (the first token left out, as it
 * soaks up attention).  With OUT.npy the probabilities [heads, T, T] are written as NumPy
 * float32: what `vkgraph attention -m MODEL_DIR -p PROMPT --layer LAYER --npy OUT.npy` writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkgraph_model.h"
#include "vkgraph_npy.h"

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) {
        fprintf(stderr, "error: %s\n", err->message);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR [cpu|vulkan] [PROMPT] [LAYER] [OUT.npy]\n", argv[0]);
        return 1;
    }
    const char *dir = argv[1], *device = argc > 2 ? argv[2] : NULL;
    const char *prompt = argc > 3 ? argv[3] : "The animal didn't cross the street because it was too tired";
    const int layer = argc > 4 ? atoi(argv[4]) : 0;
    vkg_error err = {0};

    vkg_device *dev = NULL;
    check(vkg_device_open(device, NULL, &dev, &err), &err);
    vkg_model *model = NULL;
    check(vkg_model_open(dir, dev, NULL, &model, &err), &err);
    vkg_model_info info;
    check(vkg_model_get_info(model, &info, &err), &err);
    const vkg_tokenizer *tok = vkg_model_tokenizer(model);
    if (!tok) {
        fprintf(stderr, "error: %s has no tokenizer files\n", dir);
        return 1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    check(vkg_tokenizer_encode(tok, prompt, strlen(prompt), &ids, &n, &err), &err);
    if (n == 0) {
        fprintf(stderr, "error: the prompt is empty\n");
        return 1;
    }

    /* One pass over the prompt: the layer's probabilities and no logits, so the layers after it
     * do not run. */
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.n_ctx = co.n_batch = (int)n; /* one plan, for the prompt */
    co.logits = VKG_LOGITS_NONE;
    co.attention_layer = layer;
    vkg_context *ctx = NULL;
    check(vkg_context_new(model, &co, &ctx, &err), &err);
    check(vkg_context_prefill(ctx, ids, (int)n, &err), &err);
    const size_t H = (size_t)info.n_head, T = n;
    float *probs = malloc(H * T * T * sizeof *probs); /* [H, T queries, T keys] */
    if (!probs) return 1;
    check(vkg_context_get_attention(ctx, layer, probs, H * T * T, &err), &err);

    size_t len;
    const char *last = vkg_tokenizer_token_bytes(tok, ids[T - 1], &len);
    printf("layer %d, token '%.*s' at position %zu, on %s\n", layer, (int)len, last, T - 1, vkg_device_name(dev));
    for (size_t h = 0; h < H; h++) {
        const float *row = probs + (h * T + (T - 1)) * T;
        size_t best = T > 1 ? 1 : 0;
        for (size_t j = best + 1; j < T; j++)
            if (row[j] > row[best]) best = j;
        const char *bytes = vkg_tokenizer_token_bytes(tok, ids[best], &len);
        printf("head %2zu: '%.*s' (position %zu, %.3f)\n", h, (int)len, bytes, best, (double)row[best]);
    }
    if (argc > 5) {
        const int64_t shape[3] = {(int64_t)H, (int64_t)T, (int64_t)T};
        check(vkg_npy_write_f32(argv[5], probs, 3, shape, &err), &err);
    }

    free(probs);
    free(ids);
    vkg_context_free(ctx);
    vkg_model_free(model);
    vkg_device_free(dev);
    return 0;
}
