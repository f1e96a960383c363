/* safetensors: round trips per dtype with hand-checked conversions, and every malformed file we
 * could think of, each made here in a temporary directory and each rejected with a message that
 * names the problem. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "io/safetensors.h"
#include "support/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_dir[] = "/tmp/vkg_st_XXXXXX";

static int make_dir(void **state) {
    (void)state;
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    return test_remove_tree(tmp_dir);
}

static const char *tmp_path(const char *name) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    return path;
}

static void write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* A file with the given header length field, header text and data_bytes bytes of data. */
static void write_file(const char *path, uint64_t header_len_field, const char *header, size_t data_bytes) {
    size_t hl = strlen(header), n = 8 + hl + data_bytes;
    unsigned char *buf = calloc(1, n);
    assert_non_null(buf);
    for (int b = 0; b < 8; b++) buf[b] = (unsigned char)(header_len_field >> (8 * b));
    memcpy(buf + 8, header, hl);
    for (size_t i = 0; i < data_bytes; i++) buf[8 + hl + i] = (unsigned char)i;
    write_bytes(path, buf, n);
    free(buf);
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_round_trip_f32(void **state) {
    (void)state;
    const float a[6] = {1.5f, -0.0f, INFINITY, NAN, 1e-40f /* subnormal */, -3.25e30f};
    const float s[1] = {42.0f};
    vkg_st_write w[3] = {
        {.name = "layer.a", .dtype = VKG_ST_F32, .ndim = 2, .shape = {2, 3}, .data = a},
        {.name = "scalar", .dtype = VKG_ST_F32, .ndim = 0, .data = s},
        {.name = "empty \"quoted\"\n", .dtype = VKG_ST_F32, .ndim = 2, .shape = {0, 4}, .data = NULL},
    };
    vkg_error err = {0};
    const char *path = tmp_path("f32.safetensors");
    assert_int_equal(vkg_safetensors_write(path, w, 3, &err), VKG_OK);

    /* The header is padded so the data section starts 8-byte aligned. */
    FILE *f = fopen(path, "rb");
    unsigned char len8[8];
    assert_int_equal(fread(len8, 1, 8, f), 8);
    fclose(f);
    assert_int_equal(len8[0] % 8, 0);

    vkg_safetensors *st = NULL;
    if (vkg_safetensors_open(path, &st, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_string_equal(vkg_safetensors_path(st), path);
    assert_int_equal(vkg_safetensors_count(st), 3);
    const vkg_st_tensor *t = vkg_safetensors_tensor(st, 0);
    assert_string_equal(t->name, "layer.a");
    assert_int_equal(t->dtype, VKG_ST_F32);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->bytes, 24);
    assert_int_equal(vkg_st_tensor_numel(t), 6);
    assert_ptr_equal(vkg_safetensors_find(st, "layer.a"), t);
    float out[6];
    assert_int_equal(vkg_safetensors_read(st, t, VKG_ST_F32, out, &err), VKG_OK);
    for (int i = 0; i < 6; i++) assert_int_equal(f32_bits(out[i]), f32_bits(a[i]));

    t = vkg_safetensors_find(st, "scalar");
    assert_non_null(t);
    assert_int_equal(t->ndim, 0);
    assert_int_equal(vkg_st_tensor_numel(t), 1);
    assert_int_equal(vkg_safetensors_read(st, t, VKG_ST_F32, out, &err), VKG_OK);
    assert_true(out[0] == 42.0f);

    t = vkg_safetensors_find(st, "empty \"quoted\"\n");
    assert_non_null(t);
    assert_int_equal(t->bytes, 0);
    assert_int_equal(vkg_st_tensor_numel(t), 0);
    assert_int_equal(vkg_safetensors_read(st, t, VKG_ST_F32, out, &err), VKG_OK);

    assert_null(vkg_safetensors_find(st, "nope"));
    assert_null(vkg_safetensors_tensor(st, 3));
    assert_null(vkg_safetensors_tensor(st, -1));
    assert_int_equal(vkg_safetensors_metadata_count(st), 0);
    vkg_safetensors_close(st);
    vkg_safetensors_close(NULL);
}

/* Each case: raw half bits and the float they must give, checked by hand. */
static void test_round_trip_f16(void **state) {
    (void)state;
    static const struct { uint16_t bits; float value; } cases[] = {
        {0x0000, 0.0f},           {0x8000, -0.0f},         {0x3C00, 1.0f},
        {0xC000, -2.0f},          {0x7BFF, 65504.0f},      {0x0001, 5.9604644775390625e-08f},
        {0x03FF, 6.097555160522461e-05f}, {0x0400, 6.103515625e-05f}, {0x8001, -5.9604644775390625e-08f},
        {0x3555, 0.333251953125f}, {0x7C00, INFINITY},     {0xFC00, -INFINITY},
        {0x7E00, NAN},            {0x3800, 0.5f},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    unsigned char raw[2 * N];
    for (int i = 0; i < N; i++) {
        raw[2 * i] = (unsigned char)(cases[i].bits & 0xFF); /* little endian, as the format says */
        raw[2 * i + 1] = (unsigned char)(cases[i].bits >> 8);
    }
    vkg_st_write w = {.name = "h", .dtype = VKG_ST_F16, .ndim = 1, .shape = {N}, .data = raw};
    vkg_error err = {0};
    const char *path = tmp_path("f16.safetensors");
    assert_int_equal(vkg_safetensors_write(path, &w, 1, &err), VKG_OK);
    vkg_safetensors *st = NULL;
    assert_int_equal(vkg_safetensors_open(path, &st, &err), VKG_OK);
    const vkg_st_tensor *t = vkg_safetensors_find(st, "h");
    assert_int_equal(t->dtype, VKG_ST_F16);
    assert_int_equal(t->bytes, 2 * N);
    float out[N];
    assert_int_equal(vkg_safetensors_read(st, t, VKG_ST_F32, out, &err), VKG_OK);
    for (int i = 0; i < N; i++) {
        if (isnan(cases[i].value)) {
            assert_true(isnan(out[i]));
        } else if (f32_bits(out[i]) != f32_bits(cases[i].value)) {
            fail_msg("f16 0x%04X gave %.9g, expected %.9g", cases[i].bits, out[i], cases[i].value);
        }
    }
    vkg_safetensors_close(st);
}

static void test_round_trip_bf16(void **state) {
    (void)state;
    static const struct { uint16_t bits; float value; } cases[] = {
        {0x3F80, 1.0f},  {0xBF80, -1.0f}, {0x8000, -0.0f}, {0x0000, 0.0f},
        {0x7F80, INFINITY}, {0xFF80, -INFINITY}, {0x7FC0, NAN},
        {0x0001, 9.183549615799121e-41f}, /* smallest subnormal: 2^-133 */
        {0x4049, 3.140625f}, {0x7F7F, 3.3895313892515355e38f},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    unsigned char raw[2 * N];
    for (int i = 0; i < N; i++) {
        raw[2 * i] = (unsigned char)(cases[i].bits & 0xFF);
        raw[2 * i + 1] = (unsigned char)(cases[i].bits >> 8);
    }
    vkg_st_write w = {.name = "b", .dtype = VKG_ST_BF16, .ndim = 2, .shape = {2, N / 2}, .data = raw};
    vkg_error err = {0};
    const char *path = tmp_path("bf16.safetensors");
    assert_int_equal(vkg_safetensors_write(path, &w, 1, &err), VKG_OK);
    vkg_safetensors *st = NULL;
    assert_int_equal(vkg_safetensors_open(path, &st, &err), VKG_OK);
    float out[N];
    assert_int_equal(vkg_safetensors_read(st, vkg_safetensors_tensor(st, 0), VKG_ST_F32, out, &err), VKG_OK);
    for (int i = 0; i < N; i++) {
        if (isnan(cases[i].value)) assert_true(isnan(out[i]));
        else if (f32_bits(out[i]) != f32_bits(cases[i].value))
            fail_msg("bf16 0x%04X gave %.9g, expected %.9g", cases[i].bits, out[i], cases[i].value);
    }
    vkg_safetensors_close(st);
}

static void test_f32_to_half_rounding(void **state) {
    (void)state;
    /* Every finite and infinite half survives f16 -> f32 -> f16 exactly. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = vkg_f16_to_f32((uint16_t)h);
        if (isnan(f)) assert_true(isnan(vkg_f16_to_f32(vkg_f32_to_f16(f))));
        else if (vkg_f32_to_f16(f) != h) fail_msg("half 0x%04X did not round trip", h);
    }
    assert_int_equal(vkg_f32_to_f16(65519.0f), 0x7BFF);
    assert_int_equal(vkg_f32_to_f16(65520.0f), 0x7C00);               /* ties up to inf       */
    assert_int_equal(vkg_f32_to_f16(1e10f), 0x7C00);
    assert_int_equal(vkg_f32_to_f16(-1e10f), 0xFC00);
    assert_int_equal(vkg_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3C00);   /* tie to even: down    */
    assert_int_equal(vkg_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3C02); /* tie to even: up    */
    assert_int_equal(vkg_f32_to_f16(ldexpf(1, -25)), 0x0000);          /* tie to even: zero    */
    assert_int_equal(vkg_f32_to_f16(ldexpf(1.0001f, -25)), 0x0001);
    assert_int_equal(vkg_f32_to_f16(3 * ldexpf(1, -25)), 0x0002);      /* 1.5 ulp -> 2         */
    assert_int_equal(vkg_f32_to_f16(ldexpf(1, -30)), 0x0000);
    assert_int_equal(vkg_f32_to_f16(-ldexpf(1, -30)), 0x8000);
    assert_int_equal(vkg_f32_to_f16(ldexpf(2047, -25)), 0x0400);       /* subnormal rounds up to normal */
    assert_true((vkg_f32_to_f16(NAN) & 0x7C00) == 0x7C00 && (vkg_f32_to_f16(NAN) & 0x3FF));

    assert_int_equal(vkg_f32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(vkg_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3F80);   /* tie to even: down    */
    assert_int_equal(vkg_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3F82);
    assert_int_equal(vkg_f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(vkg_f32_to_bf16(INFINITY), 0x7F80);
    assert_int_equal(vkg_f32_to_bf16(3.4028235e38f), 0x7F80);          /* rounds past the max  */
    assert_true(isnan(vkg_bf16_to_f32(vkg_f32_to_bf16(NAN))));
}

static void test_other_dtypes(void **state) {
    (void)state;
    const int32_t i32[3] = {1, -2, 3};
    const int64_t i64[2] = {5, -6};
    const double f64[1] = {0.5};
    const uint8_t u8[4] = {1, 2, 3, 4};
    const int16_t i16[2] = {7, 8};
    vkg_st_write w[7] = {
        {.name = "i32", .dtype = VKG_ST_I32, .ndim = 1, .shape = {3}, .data = i32},
        {.name = "i64", .dtype = VKG_ST_I64, .ndim = 1, .shape = {2}, .data = i64},
        {.name = "f64", .dtype = VKG_ST_F64, .ndim = 0, .data = f64},
        {.name = "u8", .dtype = VKG_ST_U8, .ndim = 2, .shape = {2, 2}, .data = u8},
        {.name = "i8", .dtype = VKG_ST_I8, .ndim = 1, .shape = {4}, .data = u8},
        {.name = "bool", .dtype = VKG_ST_BOOL, .ndim = 1, .shape = {4}, .data = u8},
        {.name = "i16", .dtype = VKG_ST_I16, .ndim = 1, .shape = {2}, .data = i16},
    };
    vkg_error err = {0};
    const char *path = tmp_path("other.safetensors");
    assert_int_equal(vkg_safetensors_write(path, w, 7, &err), VKG_OK);
    vkg_safetensors *st = NULL;
    if (vkg_safetensors_open(path, &st, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_safetensors_count(st), 7);
    for (int i = 0; i < 7; i++) {
        const vkg_st_tensor *t = vkg_safetensors_tensor(st, i);
        assert_string_equal(t->name, w[i].name);
        assert_int_equal(t->dtype, w[i].dtype);
        assert_int_equal(t->bytes, vkg_st_tensor_numel(t) * (int64_t)vkg_st_dtype_size(t->dtype));
        assert_false(vkg_st_dtype_convertible(t->dtype));
        float out[8];
        assert_int_equal(vkg_safetensors_read(st, t, VKG_ST_F32, out, &err), VKG_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.message, vkg_st_dtype_name(t->dtype)));
        assert_non_null(strstr(err.message, "only F32, F16 and BF16"));
    }
    int64_t back[2];
    assert_int_equal(vkg_safetensors_read(st, vkg_safetensors_find(st, "i64"), VKG_ST_I64, back, &err), VKG_OK);
    assert_int_equal(back[1], -6);
    vkg_safetensors_close(st);
    assert_string_equal(vkg_st_dtype_name(VKG_ST_BF16), "BF16");
    assert_string_equal(vkg_st_dtype_name((vkg_st_dtype)99), "?");
    assert_int_equal(vkg_st_dtype_size(VKG_ST_F64), 8);
    assert_true(vkg_st_dtype_convertible(VKG_ST_F16));
}

static void test_metadata_and_zero_sized(void **state) {
    (void)state;
    /* Hand-written header: metadata first, a zero-sized tensor sitting inside another's range
     * (allowed: it covers no bytes), whitespace as Python's writer leaves it. */
    const char *header = "{\"__metadata__\": {\"format\": \"pt\", \"note\": \"x\\u00e9\"},"
                         " \"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                         " \"z\": {\"dtype\": \"F16\", \"shape\": [3, 0], \"data_offsets\": [4, 4]}}   ";
    const char *path = tmp_path("meta.safetensors");
    write_file(path, strlen(header), header, 8);
    vkg_safetensors *st = NULL;
    vkg_error err = {0};
    if (vkg_safetensors_open(path, &st, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_safetensors_count(st), 2);
    assert_int_equal(vkg_safetensors_metadata_count(st), 2);
    assert_string_equal(vkg_safetensors_metadata_key(st, 0), "format");
    assert_string_equal(vkg_safetensors_metadata_get(st, "format"), "pt");
    assert_string_equal(vkg_safetensors_metadata_get(st, "note"), "x\xC3\xA9");
    assert_null(vkg_safetensors_metadata_get(st, "absent"));
    assert_null(vkg_safetensors_metadata_key(st, 2));
    assert_int_equal(vkg_safetensors_find(st, "z")->bytes, 0);
    /* This header's length leaves the data unaligned in the file; reads give bytes, little endian. */
    const vkg_st_tensor *w = vkg_safetensors_find(st, "w");
    assert_int_equal(w->offset % 4 != 0, 1);
    float out[2];
    assert_int_equal(vkg_safetensors_read(st, w, VKG_ST_F32, out, &err), VKG_OK);
    assert_int_equal(f32_bits(out[0]), 0x03020100u);
    assert_int_equal(f32_bits(out[1]), 0x07060504u);
    assert_null(vkg_safetensors_find(st, "__metadata__"));
    vkg_safetensors_close(st);
}

typedef struct bad_file {
    const char *label;
    const char *header;     /* NULL: raw bytes below                    */
    int64_t header_len;     /* -1: the header's own length              */
    size_t data_bytes;
    const char *expect[2];  /* substrings of the message                */
} bad_file;

#define T(name, body) "{\"" name "\": " body "}"
static const bad_file bad_files[] = {
    {"past-eof", "{}", 100, 0, {"header length 100 runs past the end of the file", "(2 bytes follow"}},
    {"huge-len", "{}", INT64_MAX, 0, {"header length 9223372036854775807", "over the 100000000-byte limit"}},
    {"zero-len", "{}", 0, 0, {"not valid JSON", "found end of input"}},
    {"bad-json", "{\"a\": {\"dtype\": F32}}", -1, 0, {"not valid JSON", "line 1, column 17"}},
    {"not-object", "[1, 2]", -1, 0, {"header is a JSON array, expected an object", ""}},
    {"entry-not-object", T("w", "5"), -1, 0, {"tensor \"w\": entry is a JSON number", ""}},
    {"no-dtype", T("w", "{\"shape\": [1], \"data_offsets\": [0, 4]}"), -1, 4, {"tensor \"w\": missing \"dtype\"", ""}},
    {"no-shape", T("w", "{\"dtype\": \"F32\", \"data_offsets\": [0, 4]}"), -1, 4, {"tensor \"w\": missing \"shape\"", ""}},
    {"no-offsets", T("w", "{\"dtype\": \"F32\", \"shape\": [1]}"), -1, 4, {"tensor \"w\": missing \"data_offsets\"", ""}},
    {"dtype-number", T("w", "{\"dtype\": 4, \"shape\": [1], \"data_offsets\": [0, 4]}"), -1, 4,
     {"\"dtype\" is a JSON number", ""}},
    {"unknown-dtype", T("w", "{\"dtype\": \"F8_E4M3\", \"shape\": [1], \"data_offsets\": [0, 1]}"), -1, 1,
     {"tensor \"w\": unknown dtype \"F8_E4M3\"", "known: F32, F16, BF16"}},
    {"negative-shape", T("w", "{\"dtype\": \"F32\", \"shape\": [-1, 2], \"data_offsets\": [0, 8]}"), -1, 8,
     {"tensor \"w\": shape[0] is -1", "non-negative integers"}},
    {"fractional-shape", T("w", "{\"dtype\": \"F32\", \"shape\": [2, 1.5], \"data_offsets\": [0, 12]}"), -1, 12,
     {"shape[1] is 1.5", ""}},
    {"shape-string", T("w", "{\"dtype\": \"F32\", \"shape\": \"2\", \"data_offsets\": [0, 8]}"), -1, 8,
     {"\"shape\" is a JSON string", ""}},
    {"too-many-dims", T("w", "{\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 1]}"), -1, 1,
     {"shape has 9 dimensions; at most 8", ""}},
    {"size-mismatch", T("w", "{\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}"), -1, 24,
     {"tensor \"w\": shape [2, 3] of F32 needs 24 bytes", "data_offsets [0, 20] span 20 bytes"}},
    {"size-overflow", T("w", "{\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 16], \"data_offsets\": [0, 8]}"),
     -1, 8, {"shape [4294967296, 4294967296, 16] of F32 is too large", "overflows 64 bits"}},
    {"offsets-past-end", T("w", "{\"dtype\": \"F32\", \"shape\": [6], \"data_offsets\": [0, 24]}"), -1, 16,
     {"tensor \"w\": data_offsets [0, 24] run past the end of the data section (16 bytes", ""}},
    {"begin-after-end", T("w", "{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}"), -1, 16,
     {"tensor \"w\": data_offsets [8, 4] has begin > end", ""}},
    {"offsets-one", T("w", "{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4]}"), -1, 16,
     {"\"data_offsets\" must be an array of two non-negative integers", ""}},
    {"offsets-three", T("w", "{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}"), -1, 16,
     {"must be an array of two", ""}},
    {"offsets-negative", T("w", "{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}"), -1, 16,
     {"must be an array of two", ""}},
    {"offsets-string", T("w", "{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, \"4\"]}"), -1, 16,
     {"must be an array of two", ""}},
    {"overlap", "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
                " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}", -1, 24,
     {"tensors \"a\" (bytes 0..16) and \"b\" (bytes 8..24) overlap", ""}},
    {"overlap-inside", "{\"b\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [4, 6]},"
                       " \"a\": {\"dtype\": \"U8\", \"shape\": [16], \"data_offsets\": [0, 16]}}", -1, 16,
     {"tensors \"a\" (bytes 0..16) and \"b\" (bytes 4..6) overlap", ""}},
    {"metadata-array", "{\"__metadata__\": [\"x\"]}", -1, 0, {"\"__metadata__\" is a JSON array", ""}},
    {"metadata-number", "{\"__metadata__\": {\"epoch\": 3}}", -1, 0,
     {"\"__metadata__\" key \"epoch\" holds a JSON number", ""}},
    {"nul-name", T("a\\u0000b", "{\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}"), -1, 1,
     {"contains a NUL byte", ""}},
    {"duplicate-name", "{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]},"
                       " \"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [1, 2]}}", -1, 2,
     {"duplicate key \"a\"", ""}},
};

static void expect_format_error(const char *path, const char *label, vkg_status want, const char *const expect[2]) {
    vkg_safetensors *st = (vkg_safetensors *)1;
    vkg_error err = {0};
    vkg_status got = vkg_safetensors_open(path, &st, &err);
    if (got != want) fail_msg("%s: status %s (%s), expected %s", label, vkg_status_name(got), err.message,
                              vkg_status_name(want));
    assert_null(st);
    assert_non_null(strstr(err.message, path));
    for (int k = 0; k < 2; k++)
        if (expect[k] && !strstr(err.message, expect[k]))
            fail_msg("%s: message \"%s\" lacks \"%s\"", label, err.message, expect[k]);
}

static void test_malformed_files(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++) {
        const bad_file *b = &bad_files[i];
        char name[64];
        snprintf(name, sizeof name, "%s.safetensors", b->label);
        const char *path = tmp_path(name);
        write_file(path, b->header_len < 0 ? strlen(b->header) : (uint64_t)b->header_len, b->header, b->data_bytes);
        expect_format_error(path, b->label, VKG_ERR_FORMAT, b->expect);
    }

    const char *path = tmp_path("short.safetensors");
    write_bytes(path, "", 0);
    expect_format_error(path, "empty", VKG_ERR_FORMAT, (const char *const[2]){"file is 0 bytes", "too short"});
    write_bytes(path, "\x02\x00\x00\x00\x00", 5);
    expect_format_error(path, "5 bytes", VKG_ERR_FORMAT, (const char *const[2]){"file is 5 bytes", "8-byte"});
    /* A zip (a PyTorch .bin) opened by mistake: its first bytes read as an absurd length. */
    write_bytes(path, "PK\x03\x04\x14\x00\x00\x00\x08\x00", 10);
    expect_format_error(path, "zip", VKG_ERR_FORMAT, (const char *const[2]){"is this a safetensors file?", ""});

    expect_format_error(tmp_path("missing.safetensors"), "missing", VKG_ERR_IO,
                        (const char *const[2]){"cannot open", "No such file"});
    expect_format_error(tmp_dir, "directory", VKG_ERR_IO, (const char *const[2]){"not a regular file", ""});

    /* A good file cut short: the data section no longer holds the last tensor. */
    float v[8] = {0};
    vkg_st_write w[2] = {{.name = "first", .dtype = VKG_ST_F32, .ndim = 1, .shape = {4}, .data = v},
                         {.name = "last", .dtype = VKG_ST_F32, .ndim = 2, .shape = {2, 2}, .data = v + 4}};
    vkg_error err;
    path = tmp_path("truncated.safetensors");
    assert_int_equal(vkg_safetensors_write(path, w, 2, &err), VKG_OK);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 3), 0);
    expect_format_error(path, "truncated", VKG_ERR_FORMAT,
                        (const char *const[2]){"tensor \"last\": data_offsets [16, 32] run past the end", "29 bytes"});
    assert_int_equal(truncate(path, 20), 0); /* now inside the header */
    expect_format_error(path, "truncated header", VKG_ERR_FORMAT,
                        (const char *const[2]){"runs past the end of the file", "(12 bytes follow"});
}

static void test_write_errors(void **state) {
    (void)state;
    float v[2] = {1, 2};
    vkg_error err = {0};
    vkg_st_write dup[2] = {{.name = "x", .dtype = VKG_ST_F32, .ndim = 1, .shape = {1}, .data = v},
                           {.name = "x", .dtype = VKG_ST_F32, .ndim = 1, .shape = {1}, .data = v + 1}};
    const char *path = tmp_path("w.safetensors");
    assert_int_equal(vkg_safetensors_write(path, dup, 2, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "\"x\" is used twice"));
    vkg_st_write nodata = {.name = "y", .dtype = VKG_ST_F32, .ndim = 1, .shape = {2}, .data = NULL};
    assert_int_equal(vkg_safetensors_write(path, &nodata, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "NULL data"));
    vkg_st_write negative = {.name = "y", .dtype = VKG_ST_F32, .ndim = 1, .shape = {-2}, .data = v};
    assert_int_equal(vkg_safetensors_write(path, &negative, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    vkg_st_write reserved = {.name = "__metadata__", .dtype = VKG_ST_F32, .ndim = 0, .data = v};
    assert_int_equal(vkg_safetensors_write(path, &reserved, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    vkg_st_write ok = {.name = "z", .dtype = VKG_ST_F32, .ndim = 1, .shape = {2}, .data = v};
    assert_int_equal(vkg_safetensors_write("/nonexistent/dir/w.safetensors", &ok, 1, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "/nonexistent/dir/w.safetensors"));
    /* An empty file (no tensors) is valid. */
    assert_int_equal(vkg_safetensors_write(path, NULL, 0, &err), VKG_OK);
    vkg_safetensors *st = NULL;
    assert_int_equal(vkg_safetensors_open(path, &st, &err), VKG_OK);
    assert_int_equal(vkg_safetensors_count(st), 0);
    assert_null(vkg_safetensors_find(st, "z"));
    vkg_safetensors_close(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_f32),      cmocka_unit_test(test_round_trip_f16),
        cmocka_unit_test(test_round_trip_bf16),     cmocka_unit_test(test_f32_to_half_rounding),
        cmocka_unit_test(test_other_dtypes),        cmocka_unit_test(test_metadata_and_zero_sized),
        cmocka_unit_test(test_malformed_files),     cmocka_unit_test(test_write_errors),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
