/* Tests of the .npy writer and reader (src/io/npy.c): the exact bytes the format's specification
 * asks for, round trips of every rank, files written piece by piece, files written the way numpy
 * writes them, and malformed files, which must all be VKG_ERR_FORMAT with a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vkgraph_npy.h"
#include "support/test_util.h"

typedef struct fixture {
    char dir[64];
    char path[128];
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx) return -1;
    snprintf(fx->dir, sizeof fx->dir, "/tmp/vkg_test_npy_XXXXXX");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    snprintf(fx->path, sizeof fx->path, "%s/a.npy", fx->dir);
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    remove(fx->path);
    rmdir(fx->dir);
    free(fx);
    return 0;
}

static void spit(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Builds a file from a version, a dict text and raw data bytes; the dict is padded to 64 like the
 * specification says (the reader must not depend on that). */
static void spit_npy(const char *path, int major, const char *dict, const void *data,
                     size_t data_len) {
    unsigned char buf[1024];
    size_t len_bytes = major == 1 ? 2 : 4;
    size_t pre = 8 + len_bytes;
    size_t total = (pre + strlen(dict) + 1 + 63) / 64 * 64;
    size_t header_len = total - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    for (size_t i = 0; i < len_bytes; i++) buf[8 + i] = (unsigned char)(header_len >> (8 * i));
    memset(buf + pre, ' ', header_len);
    memcpy(buf + pre, dict, strlen(dict));
    buf[total - 1] = '\n';
    assert_true(total + data_len <= sizeof buf);
    if (data_len) memcpy(buf + total, data, data_len);
    spit(path, buf, total + data_len);
}

/* Shape (2, 3): the dict is 59 characters; 10 + 59 + '\n' = 70 rounds up to 128, so the header
 * length field is 118 = 0x76 ('v'), 58 spaces of padding, then 6 floats little-endian. */
static void test_exact_header_bytes(void **state) {
    fixture *fx = *state;
    const float values[6] = {1.0f, -2.0f, 0.5f, 0.0f, 3.0f, 100.0f};
    const int64_t shape[2] = {2, 3};
    vkg_error err = {0};
    assert_int_equal(vkg_npy_write_f32(fx->path, values, 2, shape, &err), VKG_OK);

    size_t len;
    unsigned char *bytes = (unsigned char *)test_read_file(fx->path, &len);
    const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    assert_int_equal(strlen(dict), 59);
    assert_int_equal(len, 128 + 24);
    assert_memory_equal(bytes, "\x93NUMPY\x01\x00\x76\x00", 10);
    assert_memory_equal(bytes + 10, dict, 59);
    for (size_t i = 69; i < 127; i++) assert_int_equal(bytes[i], ' ');
    assert_int_equal(bytes[127], '\n');
    /* 1.0f = 0x3F800000 and -2.0f = 0xC0000000, least significant byte first. */
    assert_memory_equal(bytes + 128, "\x00\x00\x80\x3f\x00\x00\x00\xc0", 8);
    free(bytes);

    /* A one-element tuple is written as Python writes it: "(5,)". */
    const int64_t shape1[1] = {5};
    const float five[5] = {0};
    assert_int_equal(vkg_npy_write_f32(fx->path, five, 1, shape1, &err), VKG_OK);
    bytes = (unsigned char *)test_read_file(fx->path, &len);
    assert_int_equal(len, 128 + 20);
    assert_memory_equal(bytes + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }",
                        57);
    free(bytes);
}

static void test_round_trip_every_rank(void **state) {
    fixture *fx = *state;
    float values[256];
    for (int i = 0; i < 256; i++) values[i] = (float)i * 0.25f - 17.0f;
    values[3] = -0.0f;
    for (int ndim = 1; ndim <= VKG_NPY_MAX_DIMS; ndim++) {
        int64_t shape[VKG_NPY_MAX_DIMS];
        int64_t numel = 1;
        for (int i = 0; i < ndim; i++) {
            shape[i] = (i % 3) + 1 + (ndim == 1 ? 200 : 0); /* 1, 2, 3, 1, 2, 3, .. */
            numel *= shape[i];
        }
        vkg_error err = {0};
        assert_int_equal(vkg_npy_write_f32(fx->path, values, ndim, shape, &err), VKG_OK);
        float *back = NULL;
        int back_ndim = -1;
        int64_t back_shape[VKG_NPY_MAX_DIMS];
        assert_int_equal(vkg_npy_read_f32(fx->path, &back, &back_ndim, back_shape, &err), VKG_OK);
        assert_int_equal(back_ndim, ndim);
        for (int i = 0; i < ndim; i++) assert_int_equal(back_shape[i], shape[i]);
        assert_memory_equal(back, values, (size_t)numel * sizeof(float)); /* bit exact, -0 too */
        free(back);
    }
}

static void test_round_trip_empty(void **state) {
    fixture *fx = *state;
    const int64_t shape[2] = {0, 7};
    vkg_error err = {0};
    assert_int_equal(vkg_npy_write_f32(fx->path, NULL, 2, shape, &err), VKG_OK);
    float *back = NULL;
    int ndim = 0;
    int64_t back_shape[VKG_NPY_MAX_DIMS];
    assert_int_equal(vkg_npy_read_f32(fx->path, &back, &ndim, back_shape, &err), VKG_OK);
    assert_non_null(back);
    assert_int_equal(ndim, 2);
    assert_int_equal(back_shape[0], 0);
    assert_int_equal(back_shape[1], 7);
    free(back);
}

/* Files numpy itself may produce: keys in another order, version 2.0, a scalar (shape ()). */
static void test_reads_other_valid_headers(void **state) {
    fixture *fx = *state;
    const unsigned char three[12] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40};
    vkg_error err = {0};
    float *data = NULL;
    int ndim = 0;
    int64_t shape[VKG_NPY_MAX_DIMS];

    spit_npy(fx->path, 2, "{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<f4\"}", three,
             12);
    assert_int_equal(vkg_npy_read_f32(fx->path, &data, &ndim, shape, &err), VKG_OK);
    assert_int_equal(ndim, 1);
    assert_int_equal(shape[0], 3);
    assert_true(data[0] == 1.0f && data[1] == 2.0f && data[2] == 3.0f);
    free(data);

    spit_npy(fx->path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", three, 4);
    assert_int_equal(vkg_npy_read_f32(fx->path, &data, &ndim, shape, &err), VKG_OK);
    assert_int_equal(ndim, 0);
    assert_true(data[0] == 1.0f);
    free(data);
}

static void expect_format_error(const char *path, const char *needle) {
    vkg_error err = {0};
    float *data = (float *)&err; /* must be reset to NULL on failure */
    int ndim = 0;
    int64_t shape[VKG_NPY_MAX_DIMS];
    assert_int_equal(vkg_npy_read_f32(path, &data, &ndim, shape, &err), VKG_ERR_FORMAT);
    assert_null(data);
    assert_int_equal(err.status, VKG_ERR_FORMAT);
    if (!strstr(err.message, needle)) fail_msg("message \"%s\" lacks \"%s\"", err.message, needle);
}

static void test_malformed_files(void **state) {
    fixture *fx = *state;
    const float four[4] = {1, 2, 3, 4};
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";

    spit(fx->path, "\x93NUMPX\x01\x00\x10\x00{}", 12);
    expect_format_error(fx->path, "magic");

    spit(fx->path, "\x93NUM", 4);
    expect_format_error(fx->path, "magic");

    spit_npy(fx->path, 1, good, four, 12); /* one float short */
    expect_format_error(fx->path, "truncated");

    spit_npy(fx->path, 1, good, four, 16);
    size_t len;
    unsigned char *bytes = (unsigned char *)test_read_file(fx->path, &len);
    spit(fx->path, bytes, 40); /* cut inside the header */
    free(bytes);
    expect_format_error(fx->path, "truncated npy header");

    unsigned char longer[20] = {0};
    spit_npy(fx->path, 1, good, longer, 20); /* one float too many */
    expect_format_error(fx->path, "holds 20");

    spit_npy(fx->path, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", four, 16);
    expect_format_error(fx->path, "'<f8'");
    spit_npy(fx->path, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", four, 16);
    expect_format_error(fx->path, "'>f4'");

    spit_npy(fx->path, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", four, 16);
    expect_format_error(fx->path, "Fortran");

    spit_npy(fx->path, 1, "{'descr': '<f4', 'shape': (4,), }", four, 16);
    expect_format_error(fx->path, "fortran_order");

    spit_npy(fx->path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, -1), }", four,
             16);
    expect_format_error(fx->path, "shape");

    spit_npy(fx->path, 1,
             "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,4), }", four, 16);
    expect_format_error(fx->path, "shape");

    spit_npy(fx->path, 4, good, four, 16);
    expect_format_error(fx->path, "version 4.0");
}

/* The writer in pieces gives the file the whole write gives, byte for byte; too many floats, too
 * few at close, or floats from NULL fail with a message and leave no file. */
static void test_pieces(void **state) {
    fixture *fx = *state;
    float values[2 * 3 * 5];
    for (int i = 0; i < 30; i++) values[i] = (float)i * 0.25f - 3.0f;
    const int64_t shape[3] = {2, 3, 5};
    vkg_error err = {0};
    char whole[200];
    snprintf(whole, sizeof whole, "%s/whole.npy", fx->dir);
    assert_int_equal(vkg_npy_write_f32(whole, values, 3, shape, &err), VKG_OK);
    vkg_npy_writer *w = NULL;
    assert_int_equal(vkg_npy_writer_open(fx->path, 3, shape, &w, &err), VKG_OK);
    assert_int_equal(vkg_npy_writer_append(w, values, 0, &err), VKG_OK);
    assert_int_equal(vkg_npy_writer_append(w, values, 7, &err), VKG_OK);
    assert_int_equal(vkg_npy_writer_append(w, values + 7, 23, &err), VKG_OK);
    assert_int_equal(vkg_npy_writer_close(w, &err), VKG_OK);
    size_t na = 0, nb = 0;
    char *a = test_read_file(whole, &na), *b = test_read_file(fx->path, &nb);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a);
    free(b);
    remove(whole);

    assert_int_equal(vkg_npy_writer_open(fx->path, 3, shape, &w, &err), VKG_OK);
    assert_int_equal(vkg_npy_writer_append(w, values, 29, &err), VKG_OK);
    assert_int_equal(vkg_npy_writer_append(w, values, 2, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "29 are written"));
    assert_int_equal(access(fx->path, F_OK), -1);

    assert_int_equal(vkg_npy_writer_open(fx->path, 3, shape, &w, &err), VKG_OK);
    assert_int_equal(vkg_npy_writer_append(w, values, 12, &err), VKG_OK);
    assert_int_equal(vkg_npy_writer_close(w, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "12 of the shape's 30"));
    assert_int_equal(access(fx->path, F_OK), -1);

    assert_int_equal(vkg_npy_writer_open(fx->path, 3, shape, &w, &err), VKG_OK);
    assert_int_equal(vkg_npy_writer_append(w, NULL, 3, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(access(fx->path, F_OK), -1);

    /* a device that takes no bytes: the error says so, and the device is not removed */
    assert_int_equal(vkg_npy_write_f32("/dev/full", values, 3, shape, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "cannot write /dev/full: No space left on device"));
    assert_int_equal(access("/dev/full", F_OK), 0);
}

static void test_argument_and_io_errors(void **state) {
    fixture *fx = *state;
    const float one = 1.0f;
    const int64_t shape[VKG_NPY_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t negative[1] = {-3};
    vkg_error err = {0};
    assert_int_equal(vkg_npy_write_f32(fx->path, &one, 0, shape, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_npy_write_f32(fx->path, &one, 9, shape, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_npy_write_f32(fx->path, &one, 1, negative, &err),
                     VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "-3"));

    char missing_dir[200];
    snprintf(missing_dir, sizeof missing_dir, "%s/no/such/dir.npy", fx->dir);
    assert_int_equal(vkg_npy_write_f32(missing_dir, &one, 1, shape, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, missing_dir));

    float *data = NULL;
    int ndim = 0;
    int64_t back_shape[VKG_NPY_MAX_DIMS];
    assert_int_equal(vkg_npy_read_f32(missing_dir, &data, &ndim, back_shape, &err),
                     VKG_ERR_NOT_FOUND);
    assert_null(data);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exact_header_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_every_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pieces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reads_other_valid_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_argument_and_io_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
