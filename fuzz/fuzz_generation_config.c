/* A model folder's generation_config.json, then (after FUZZ_SEPARATOR) its config.json, read for
 * the stop ids and the generation defaults.  Whatever the bytes, reading either fails with a
 * message naming the file or gives stop ids inside the vocabulary and options that check. */
#include "fuzz.h"

#include "models/generation_config.h"

#include <string.h>

enum { VOCAB = 300 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *gen, *cfg;
    size_t gen_len, cfg_len;
    fuzz_split(data, size, &gen, &gen_len, &cfg, &cfg_len);
    fuzz_write_file("generation_config.json", gen, gen_len);
    if (cfg_len) fuzz_write_file("config.json", cfg, cfg_len);
    else fuzz_remove_file("config.json");
    vkg_generation_config gc;
    vkg_error err;
    if (vkg_generation_config_read(fuzz_dir(), VOCAB, &gc, &err) != VKG_OK) {
        FUZZ_CHECK(strstr(err.message, "generation_config.json") != NULL || strstr(err.message, "config.json") != NULL);
        return 0;
    }
    FUZZ_CHECK(memchr(gc.note, '\0', sizeof gc.note) != NULL);
    vkg_generation_config_finish_stops(&gc, 7, VKG_NO_TOKEN);
    FUZZ_CHECK(gc.n_stop >= 1 && gc.n_stop <= VKG_CONFIG_MAX_TOKEN_IDS);
    for (int i = 0; i < gc.n_stop; i++) FUZZ_CHECK(gc.stop_ids[i] >= 0 && gc.stop_ids[i] < VOCAB);
    FUZZ_CHECK(gc.bos_token == VKG_NO_TOKEN || (gc.bos_token >= 0 && gc.bos_token < VOCAB));
    vkg_generate_options o;
    vkg_generation_config_options(&gc, &o);
    FUZZ_CHECK(o.max_tokens >= 1);
    FUZZ_CHECK(vkg_sampling_options_check(&o.sampling, &err) == VKG_OK);
    return 0;
}
