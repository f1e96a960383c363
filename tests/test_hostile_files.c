/* Files that are not regular files, in every place vkgraph reads one: a FIFO must not block in
 * open() and a directory must not be sized with ftell (2^63 bytes).  Each is refused with a
 * message naming the path and what it is.  alarm() (library) and timeout(1) (CLI) bound every
 * case, so that a regression fails instead of hanging the suite. */
#include "gpt2_cli_run.h"

#include "base/json.h"
#include "vkgraph_npy.h"
#include "io/safetensors.h"
#include "io/tokenizer.h"
#include "support/vk_test.h"
#include "vulkan/pipelines.h"

#include <sys/stat.h>

enum { BOUND_S = 20 };

static void make_fifo(const char *path) {
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
}

static void make_dir(const char *path) {
    unlink(path);
    assert_int_equal(mkdir(path, 0700), 0);
}

static void expect_refused(vkg_status st, const vkg_error *err, const char *path, const char *what) {
    alarm(0);
    assert_int_not_equal(st, VKG_OK);
    char want[3000];
    snprintf(want, sizeof want, "%s: is %s, not a regular file", path, what);
    if (!strstr(err->message, want)) fail_msg("message lacks \"%s\": %s", want, err->message);
}

static void test_json_file(void **state) {
    (void)state;
    const char *p = in_tmp("fifo.json");
    vkg_error err = {0};
    vkg_json *j = NULL;
    make_fifo(p);
    alarm(BOUND_S);
    expect_refused(vkg_json_parse_file(p, &j, &err), &err, p, "a FIFO");
    rmdir(p), unlink(p);
    make_dir(p);
    alarm(BOUND_S);
    expect_refused(vkg_json_parse_file(p, &j, &err), &err, p, "a directory");
    assert_null(j);
    rmdir(p);
}

static void test_safetensors_file(void **state) {
    (void)state;
    const char *p = in_tmp("fifo.safetensors");
    vkg_error err = {0};
    vkg_safetensors *st = NULL;
    make_fifo(p);
    alarm(BOUND_S);
    expect_refused(vkg_safetensors_open(p, &st, &err), &err, p, "a FIFO");
    unlink(p);
    make_dir(p);
    alarm(BOUND_S);
    expect_refused(vkg_safetensors_open(p, &st, &err), &err, p, "a directory");
    assert_null(st);
    rmdir(p);
}

static void test_npy_file(void **state) {
    (void)state;
    const char *p = in_tmp("fifo.npy");
    vkg_error err = {0};
    float *data = NULL;
    int ndim = 0;
    int64_t shape[VKG_NPY_MAX_DIMS];
    make_fifo(p);
    alarm(BOUND_S);
    expect_refused(vkg_npy_read_f32(p, &data, &ndim, shape, &err), &err, p, "a FIFO");
    unlink(p);
    make_dir(p);
    alarm(BOUND_S);
    expect_refused(vkg_npy_read_f32(p, &data, &ndim, shape, &err), &err, p, "a directory");
    assert_null(data);
    rmdir(p);
}

static const char *gpt2_tokenizer(void) {
    static char dir[1200];
    snprintf(dir, sizeof dir, "%s/../../data/gpt2-tokenizer", data_dir);
    return dir;
}

/* Each tokenizer file in turn is a FIFO; the other of its pair, read first, is the real one. */
static void test_tokenizer_files(void **state) {
    (void)state;
    static const char *const names[][3] = {{"tokenizer.json", NULL, NULL},
                                           {"vocab.json", "merges.txt", "vocab.bpe"},
                                           {"encoder.json", "vocab.bpe", "vocab.bpe"},
                                           {"vocab.bpe", "encoder.json", "encoder.json"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char dir[1300], special[1400], cmd[4000];
        snprintf(dir, sizeof dir, "%s/tok%zu", tmp, k);
        make_dir(dir);
        snprintf(special, sizeof special, "%s/%s", dir, names[k][0]);
        make_fifo(special);
        if (names[k][1]) {
            snprintf(cmd, sizeof cmd, "cp '%s/%s' '%s/%s'", gpt2_tokenizer(), names[k][2], dir, names[k][1]);
            assert_int_equal(system(cmd), 0);
        }
        vkg_error err = {0};
        vkg_tokenizer *t = NULL;
        alarm(BOUND_S);
        expect_refused(vkg_tokenizer_load(dir, &t, &err), &err, special, "a FIFO");
        assert_null(t);
    }
}

/* A FIFO where the pipeline cache would be: the device starts with an empty cache, at once. */
static void test_pipeline_cache_fifo(void **state) {
    (void)state;
    vkg_device *d = vk_test_open();
    vkg_vk_context *c = vk_test_context(d);
    const char *p = in_tmp("cache.bin");
    make_fifo(p);
    VkPipelineCache cache = VK_NULL_HANDLE;
    alarm(BOUND_S);
    assert_int_equal(vkg_vk_cache_create(c, p, &cache), VK_SUCCESS);
    alarm(0);
    vkDestroyPipelineCache(c->device, cache, NULL);
    unlink(p);
    vk_test_close(d);
}

/* A model folder copied from the tiny golden model, with `name` replaced by a FIFO or a folder. */
static const char *model_with(const char *name, int fifo) {
    static char dir[1300];
    char cmd[8000], path[1400];
    snprintf(dir, sizeof dir, "%s/model-%s-%d", tmp, name, fifo);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s' && cp '%s/config.json' '%s/model.safetensors' '%s/'", dir,
             dir, tiny, tiny, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (fifo) make_fifo(path);
    else make_dir(path);
    return dir;
}

#define BOUNDED(...) run((const char *const[]){"/usr/bin/timeout", "20", bin, __VA_ARGS__, NULL}, NULL)

static void test_cli_model_files(void **state) {
    (void)state;
    need_binary();
    static const char *const names[] = {"config.json", "model.safetensors"};
    for (int n = 0; n < 2; n++)
        for (int fifo = 0; fifo < 2; fifo++) {
            const char *dir = model_with(names[n], fifo);
            char want[1500];
            snprintf(want, sizeof want, "%s/%s: is %s, not a regular file", dir, names[n],
                     fifo ? "a FIFO" : "a directory");
            expect_fail(BOUNDED("generate", "-m", dir, "--device", "cpu", "--ids", "1,2", "-n", "1"), "generate",
                        want);
        }
}

/* -f may be a pipe or standard input, so it is not held to regular files, but it is read with a
 * bound: /dev/zero ends with a message instead of eating all memory. */
static void test_cli_prompt_bound(void **state) {
    (void)state;
    need_binary();
    expect_fail(BOUNDED("tokenize", "--tokenizer", gpt2_tokenizer(), "-f", "/dev/zero"), "tokenize",
                "/dev/zero: more than 64 MiB; a prompt file is read up to 64 MiB");
    /* A FIFO with a writer is read as before. */
    const char *p = in_tmp("prompt.fifo");
    make_fifo(p);
    pid_t w = fork();
    assert_true(w >= 0);
    if (w == 0) {
        alarm(BOUND_S);
        FILE *f = fopen(p, "w");
        if (f) fputs("Hello", f), fclose(f);
        _exit(0);
    }
    result r = BOUNDED("tokenize", "--tokenizer", gpt2_tokenizer(), "-f", p);
    waitpid(w, NULL, 0);
    expect_ok(&r, "tokenize -f FIFO");
    assert_non_null(strstr(r.out, "15496"));
    result_free(&r);
    unlink(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_file),
        cmocka_unit_test(test_safetensors_file),
        cmocka_unit_test(test_npy_file),
        cmocka_unit_test(test_tokenizer_files),
        cmocka_unit_test(test_pipeline_cache_fifo),
        cmocka_unit_test(test_cli_model_files),
        cmocka_unit_test(test_cli_prompt_bound),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
