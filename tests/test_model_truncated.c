/* A model file cut short or changed around a load ends in a message, never in a signal.  The
 * weights are read with pread into memory the model owns (no mapping of model.safetensors), so:
 *   - a file truncated at any point before loading is refused with a message (VKG_ERR_FORMAT or
 *     VKG_ERR_IO) naming the file;
 *   - one truncated after the header was read but before the tensors were gives a short read,
 *     VKG_ERR_IO saying the file ends early; one rewritten in place (same size, new data) is
 *     caught by the size / modification time / inode check after the reads;
 *   - truncated while another thread loads it: a clean error or a complete model, nothing else;
 *   - truncated (or removed) after loading: runs on the CPU and on Vulkan give the logits they
 *     gave before, since nothing reads the file any more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "io/safetensors.h"
#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/gpt2_random.h"
#include "support/test_util.h"
#include "support/vk_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static vkg_device *cpu, *gpu;
static char *tmp;
static const int32_t ids[5] = {1, 2, 3, 40, 5};

static const char *model_dir(void) {
    static char d[512];
    snprintf(d, sizeof d, "%s/model", tmp);
    return d;
}

static const char *weights_path(void) {
    static char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", model_dir());
    return p;
}

/* A fresh tiny model (F16 when half, so both element sizes are read); returns the file's size.
 * big: 256 wide with 8192 tokens (about 14 MB in f32), so a load takes long enough for a cut
 * from another thread to land in the middle of it. */
static off_t write_model_sized(int half, int big) {
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    if (big) o.config.n_embd = 256, o.config.vocab_size = 8192, o.config.bos_token_id = o.config.eos_token_id = 0;
    o.dtype = half ? VKG_ST_F16 : VKG_ST_F32;
    o.attn_bias_buffers = 1;
    vkg_error err = {0};
    if (vkg_gpt2_write_random(model_dir(), &o, &err) != VKG_OK) fail_msg("%s", err.message);
    struct stat sb;
    assert_int_equal(stat(weights_path(), &sb), 0);
    return sb.st_size;
}

static off_t write_model(int half) { return write_model_sized(half, 0); }

static int setup(void **state) {
    (void)state;
    tmp = test_tmpdir("truncated");
    return tmp ? vk_test_pair_setup(&cpu, &gpu) : -1;
}

static int teardown(void **state) {
    (void)state;
    int rc = test_remove_tree(tmp);
    free(tmp);
    return vk_test_pair_teardown(&cpu, &gpu) == 0 && rc == 0 ? 0 : -1;
}

static void expect_refused(vkg_status st, const vkg_error *err, const char *where) {
    if (st != VKG_ERR_FORMAT && st != VKG_ERR_IO)
        fail_msg("%s: status %s (%s), expected a format or I/O error", where, vkg_status_name(st), err->message);
    if (!strstr(err->message, "model.safetensors")) fail_msg("%s: the message does not name the file: %s", where, err->message);
}

/* Cut before loading at every interesting point: inside the length, inside the header, at the
 * start of the data, inside a tensor, one byte short. */
static void test_truncated_before_load(void **state) {
    (void)state;
    for (int half = 0; half < 2; half++) {
        const off_t size = write_model(half);
        const off_t cuts[] = {0, 4, 8, 9, 100, size / 3, size / 2, size - 100, size - 1};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            write_model(half);
            assert_int_equal(truncate(weights_path(), cuts[i]), 0);
            vkg_gpt2 *m = NULL;
            vkg_error err = {0};
            char where[64];
            snprintf(where, sizeof where, "%s cut at %lld of %lld", half ? "F16" : "F32", (long long)cuts[i],
                     (long long)size);
            expect_refused(vkg_gpt2_load(model_dir(), &m, &err), &err, where);
            assert_null(m);
        }
    }
}

/* Cut after the header was read: the tensor read comes up short, with a message. */
static void test_truncated_after_open(void **state) {
    (void)state;
    const off_t size = write_model(1);
    vkg_safetensors *st = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_safetensors_open(weights_path(), &st, &err), VKG_OK);
    const vkg_st_tensor *t = vkg_safetensors_find(st, "wte.weight");
    assert_non_null(t);
    assert_int_equal(truncate(weights_path(), (off_t)t->offset + 10), 0);
    void *buf = malloc(t->bytes);
    assert_int_equal(vkg_safetensors_read(st, t, VKG_ST_F16, buf, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "truncated"));
    assert_int_equal(vkg_safetensors_check_unchanged(st, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "changed while it was being read"));
    free(buf);
    vkg_safetensors_close(st);
    (void)size;
}

/* The same size but other contents, written after open: the reads succeed, the check after them
 * does not (the modification time moved). */
static void test_rewritten_after_open(void **state) {
    (void)state;
    write_model(0);
    vkg_safetensors *st = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_safetensors_open(weights_path(), &st, &err), VKG_OK);
    assert_int_equal(vkg_safetensors_check_unchanged(st, &err), VKG_OK);
    struct timespec later = {.tv_sec = time(NULL) + 5};
    FILE *f = fopen(weights_path(), "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, -4, SEEK_END), 0);
    assert_int_equal(fwrite("\x7f\x7f\x7f\x7f", 1, 4, f), 4);
    assert_int_equal(fclose(f), 0);
    struct timespec times[2] = {later, later};
    assert_int_equal(utimensat(AT_FDCWD, weights_path(), times, 0), 0);
    assert_int_equal(vkg_safetensors_check_unchanged(st, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "modified"));
    vkg_safetensors_close(st);
}

typedef struct cutter {
    off_t at;
    long delay_us;
} cutter;

static void *cut_later(void *arg) {
    const cutter *c = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = c->delay_us * 1000};
    nanosleep(&ts, NULL);
    if (truncate(weights_path(), c->at) != 0) perror("truncate");
    return NULL;
}

/* Truncated while another thread loads: each load either completes (the cut came after it) or
 * ends in a format or I/O error naming the file. */
static void test_truncated_while_loading(void **state) {
    (void)state;
    int loaded = 0, refused = 0;
    for (int round = 0; round < 24; round++) {
        const off_t size = write_model_sized(round % 2, 1);
        cutter c = {.at = size / (2 + round % 5), .delay_us = round * 1000L};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, cut_later, &c), 0);
        vkg_gpt2 *m = NULL;
        vkg_error err = {0};
        vkg_status st = vkg_gpt2_load(model_dir(), &m, &err);
        assert_int_equal(pthread_join(th, NULL), 0);
        if (st == VKG_OK) {
            loaded++;
            vkg_gpt2_free(m);
        } else {
            refused++;
            expect_refused(st, &err, "cut while loading");
        }
    }
    fprintf(stderr, "  24 loads with a concurrent cut: %d complete, %d refused with a message\n", loaded, refused);
}

/* After loading, the file may be cut to nothing or removed: runs still give the same logits. */
static void test_run_after_load_survives(void **state) {
    (void)state;
    vkg_device *devs[2] = {cpu, gpu};
    for (int half = 0; half < 2; half++)
        for (int d = 0; d < 2; d++) {
            if (!devs[d]) continue;
            write_model(half);
            vkg_gpt2 *m = NULL;
            vkg_error err = {0};
            if (vkg_gpt2_load(model_dir(), &m, &err) != VKG_OK) fail_msg("%s", err.message);
            float before[5 * 64], after[5 * 64];
            assert_int_equal(vkg_decoder_forward(&m->decoder, devs[d], ids, 5, 1, before, VKG_NO_ATTENTION, NULL, &err), VKG_OK);
            assert_int_equal(truncate(weights_path(), 0), 0);
            assert_int_equal(vkg_decoder_forward(&m->decoder, devs[d], ids, 5, 1, after, VKG_NO_ATTENTION, NULL, &err), VKG_OK);
            assert_memory_equal(before, after, sizeof before);
            assert_int_equal(unlink(weights_path()), 0);
            assert_int_equal(vkg_decoder_forward(&m->decoder, devs[d], ids, 5, 1, after, VKG_NO_ATTENTION, NULL, &err), VKG_OK);
            assert_memory_equal(before, after, sizeof before);
            vkg_gpt2_free(m);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_before_load),
        cmocka_unit_test(test_truncated_after_open),
        cmocka_unit_test(test_rewritten_after_open),
        cmocka_unit_test(test_truncated_while_loading),
        cmocka_unit_test(test_run_after_load_survives),
    };
    return vk_test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
