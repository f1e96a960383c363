/* What a config.json and a request imply is summed and checked before it is allocated.
 *
 * A model of 4096 layers and 1,048,576 positions (a 52 MB file: 8 channels, 300 tokens) asks
 * for a KV cache of 256 GiB when generate is asked for the whole context: it is refused with the
 * need and the limit, on the CPU (the machine's memory) and on Vulkan (the device's heaps),
 * while the process stays small (its peak resident memory is measured).  A config whose
 * vocabulary or context the weights do not match, or whose n_embd does not split into heads,
 * is refused at load.  And a KV cache that fits is zeroed lazily: a 4 GiB cache whose first
 * positions are used costs megabytes of resident memory, not gigabytes. */
#include "gpt2_cli_run.h"

#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/gpt2_random.h"

#include <inttypes.h>
#include <math.h>
#include <sys/resource.h>

/* Peak resident memory of this process (VmHWM, in bytes), from /proc. */
static uint64_t peak_resident(void) {
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %" SCNu64, &kib) == 1) break;
    fclose(f);
    assert_true(kib > 0);
    return kib << 10;
}

/* Peak resident memory of the largest child waited for so far (bytes). */
static uint64_t child_peak_resident(void) {
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_CHILDREN, &ru), 0);
    return (uint64_t)ru.ru_maxrss << 10;
}

static const char *write_model(const char *name, int layers, int heads, int embd, int positions, int vocab) {
    static char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp(name));
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    o.config.n_layer = layers;
    o.config.n_head = heads;
    o.config.n_embd = embd;
    o.config.n_positions = positions;
    o.config.vocab_size = vocab;
    o.config.bos_token_id = o.config.eos_token_id = vocab - 1;
    vkg_error err = {0};
    if (vkg_gpt2_write_random(dir, &o, &err) != VKG_OK) fail_msg("%s", err.message);
    return dir;
}

#define GIB ((uint64_t)1 << 30)

static void test_deep_long_model_refused(void **state) {
    (void)state;
    need_binary();
    const char *deep = write_model("deep", 4096, 2, 8, 1 << 20, 300);
    /* Asked for a cache of the whole context (a length left to the model would be shortened to
     * what fits), on the CPU: 2 x 4096 layers x 2^20 positions x 8 floats = 256 GiB of KV cache.
     * On Vulkan, 30,000 positions (a cache lavapipe's shaders can still loop over) ask for 7.3 GiB
     * of its 2 GiB heap. */
    const char *devices[] = {"cpu", "vulkan"}, *tokens[] = {"1048576", "30000"};
    const char *parts[] = {"the CPU session needs 256.0 GiB", "MiB of device-local memory"};
    for (int d = 0; d < 2; d++) {
        result r = run((const char *const[]){bin, "generate", "-m", deep, "--ids", "1", "-n", tokens[d], "--ctx",
                                             tokens[d], "--device", devices[d], NULL}, NULL);
        if (r.status != 1 || !strstr(r.err, parts[d]))
            fail_msg("%s: exit %d, stderr: %s", devices[d], r.status, r.err);
        result_free(&r);
        /* Refused before allocating: the process held little more than the 52 MB file. */
        if (child_peak_resident() > 2 * GIB)
            fail_msg("%s: the refused generate peaked at %.1f GiB resident", devices[d],
                     (double)child_peak_resident() / (double)GIB);
    }
    /* The same through the library, with the KV cache as the message's largest part. */
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_gpt2_load(deep, &m, &err), VKG_OK);
    vkg_device *cpu = NULL;
    assert_int_equal(vkg_device_open("cpu", NULL, &cpu, &err), VKG_OK);
    vkg_generator gen;
    assert_int_equal(vkg_generator_new(&m->decoder, cpu, 0, &gen, &err), VKG_ERR_OUT_OF_MEMORY);
    if (!strstr(err.message, "256.0 GiB of states")) fail_msg("%s", err.message);
    vkg_device_free(cpu);
    vkg_gpt2_free(m);
}

/* Keys the weights contradict, or a shape that cannot be split into heads: refused at load. */
static void test_config_contradictions(void **state) {
    (void)state;
    const char *small = write_model("small", 2, 2, 8, 16, 300);
    char path[1300];
    snprintf(path, sizeof path, "%s/config.json", small);
    vkg_gpt2_config cfg;
    vkg_error err = {0};
    assert_int_equal(vkg_gpt2_config_load(path, &cfg, &err), VKG_OK);
    const struct { int vocab, positions, embd, heads; const char *part; } cases[] = {
        {1 << 24, 16, 8, 2, "wte.weight"},        /* a huge vocabulary: wte would be 512 MiB */
        {300, 1 << 20, 8, 2, "wpe.weight"},       /* a million positions the file does not hold */
        {300, 16, 8, 3, "not divisible by n_head"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vkg_gpt2_config c = cfg;
        c.vocab_size = cases[i].vocab;
        c.bos_token_id = c.eos_token_id = VKG_GPT2_NO_TOKEN;
        c.n_positions = cases[i].positions;
        c.n_embd = cases[i].embd;
        c.n_head = cases[i].heads;
        /* Written by hand: the writer validates, and n_embd 8 over 3 heads must reach the reader. */
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "{\"n_layer\": %d, \"n_head\": %d, \"n_embd\": %d, \"n_positions\": %d, \"vocab_size\": %d}\n",
                c.n_layer, c.n_head, c.n_embd, c.n_positions, c.vocab_size);
        assert_int_equal(fclose(f), 0);
        vkg_gpt2 *m = NULL;
        assert_int_not_equal(vkg_gpt2_load(small, &m, &err), VKG_OK);
        assert_null(m);
        if (!strstr(err.message, cases[i].part)) fail_msg("case %zu: %s", i, err.message);
    }
}

/* 512 layers x 131,072 positions x 8 channels: a 4 GiB KV cache (in a 6 MB model) that this
 * machine can hold.  Fed a few tokens, the process stays far below it: the cache's pages are
 * zero until written. */
static void test_lazy_kv_cache(void **state) {
    (void)state;
    const char *dir = write_model("lazy", 512, 2, 8, 1 << 17, 300);
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_gpt2_load(dir, &m, &err), VKG_OK);
    vkg_device *cpu = NULL;
    vkg_device_options o = {.cpu_threads = 1, .quiet = 1};
    assert_int_equal(vkg_device_open("cpu", &o, &cpu, &err), VKG_OK);
    vkg_generator gen;
    vkg_status st = vkg_generator_new(&m->decoder, cpu, 0, &gen, &err);
    if (st == VKG_ERR_OUT_OF_MEMORY) { /* a machine with less than 4 GiB: refused, as it must be */
        vkg_device_free(cpu);
        vkg_gpt2_free(m);
        skip();
    }
    if (st != VKG_OK) fail_msg("%s", err.message);
    const int32_t ids[3] = {1, 2, 3};
    if (vkg_generator_feed(&gen, ids, 3, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_true(isfinite(gen.logits[0]));
    const uint64_t peak = peak_resident();
    if (peak > GIB) fail_msg("a 4 GiB KV cache with 3 tokens in it peaked at %.2f GiB resident", (double)peak / GIB);
    vkg_generator_free(&gen);
    vkg_device_free(cpu);
    vkg_gpt2_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lazy_kv_cache), /* first: the peak is this process's whole life */
        cmocka_unit_test(test_deep_long_model_refused),
        cmocka_unit_test(test_config_contradictions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
