/* A GPT-2 config.json.  Whatever the bytes, loading either fails with a message naming the file
 * or gives a config that validates, writes back as a config.json, and reads back the same. */
#include "fuzz.h"

#include "models/gpt2_config.h"
#include "models/gpt2_weights.h"

#include <string.h>

static int same_config(const vkg_gpt2_config *a, const vkg_gpt2_config *b) {
    return a->n_layer == b->n_layer && a->n_head == b->n_head && a->n_embd == b->n_embd &&
           a->n_positions == b->n_positions && a->vocab_size == b->vocab_size && a->n_inner == b->n_inner &&
           a->layer_norm_epsilon == b->layer_norm_epsilon && strcmp(a->activation, b->activation) == 0 &&
           a->scale_attn_weights == b->scale_attn_weights &&
           a->scale_attn_by_inverse_layer_idx == b->scale_attn_by_inverse_layer_idx &&
           a->reorder_and_upcast_attn == b->reorder_and_upcast_attn && a->bos_token_id == b->bos_token_id &&
           a->eos_token_id == b->eos_token_id;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("config.json", data, size);
    vkg_gpt2_config cfg, back;
    vkg_error err;
    if (vkg_gpt2_config_load(path, &cfg, &err) != VKG_OK) {
        FUZZ_CHECK(err.message[0] != '\0' && strstr(err.message, "config.json") != NULL);
        return 0;
    }
    FUZZ_CHECK(vkg_gpt2_config_validate(&cfg, &err) == VKG_OK);
    FUZZ_CHECK(vkg_gpt2_inner_size(&cfg) > 0);
    FUZZ_CHECK(vkg_gpt2_weights_numel(&cfg, 0) > 0);
    const char *again = fuzz_write_file("again.json", "", 0);
    FUZZ_CHECK(vkg_gpt2_config_write(again, &cfg, &err) == VKG_OK);
    FUZZ_CHECK(vkg_gpt2_config_load(again, &back, &err) == VKG_OK);
    FUZZ_CHECK(same_config(&cfg, &back));
    return 0;
}
