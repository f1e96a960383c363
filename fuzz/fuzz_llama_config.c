/* A Llama-family config.json (Llama, Mistral, Qwen2, Qwen3; rope scaling of every type, windows,
 * the newer rope_parameters).  Whatever the bytes, loading either fails with a message naming the
 * file, or gives a config that validates, whose rotary frequencies are finite and not negative
 * and cos/sin factor finite and positive, whose windowed layers have a window, and whose ids lie
 * in the vocabulary. */
#include "fuzz.h"

#include "models/llama_config.h"

#include <math.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("config.json", data, size);
    static vkg_llama_config cfg; /* 4 KiB of window flags: off the stack */
    vkg_error err;
    if (vkg_llama_config_load(path, &cfg, &err) != VKG_OK) {
        FUZZ_CHECK(err.message[0] != '\0' && strstr(err.message, "config.json") != NULL);
        return 0;
    }
    FUZZ_CHECK(vkg_llama_config_validate(&cfg, &err) == VKG_OK);
    FUZZ_CHECK(cfg.n_head % cfg.n_kv_head == 0 && cfg.head_dim % 2 == 0);
    vkg_rope_config rope = cfg.rope;
    rope.dim = cfg.head_dim;
    static double inv_freq[65536 / 2];
    double attention_factor = 0.0;
    FUZZ_CHECK(vkg_rope_inv_freq(&rope, inv_freq, &attention_factor, &err) == VKG_OK);
    FUZZ_CHECK(isfinite(attention_factor) && attention_factor > 0.0);
    for (int i = 0; i < cfg.head_dim / 2; i++) FUZZ_CHECK(isfinite(inv_freq[i]) && inv_freq[i] >= 0.0);
    for (int l = 0; l < cfg.n_layer; l++) FUZZ_CHECK(!cfg.windowed[l] || cfg.sliding_window > 0);
    FUZZ_CHECK(cfg.bos_token_id == VKG_NO_TOKEN || (cfg.bos_token_id >= 0 && cfg.bos_token_id < cfg.vocab_size));
    FUZZ_CHECK(cfg.eos_token_id == VKG_NO_TOKEN || (cfg.eos_token_id >= 0 && cfg.eos_token_id < cfg.vocab_size));
    return 0;
}
