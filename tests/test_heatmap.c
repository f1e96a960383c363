/* Tests of the attention heatmap (src/io/heatmap.c): the PNG is read back with cairo and its
 * pixels checked where the layout says cells, colour bar and labels are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The library links cairo privately, so its include directory is not on this target's path. */
#include <cairo/cairo.h>

#include "vkgraph_heatmap.h"

typedef struct fixture {
    char dir[64];
    char path[128];
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx) return -1;
    snprintf(fx->dir, sizeof fx->dir, "/tmp/vkg_test_heatmap_XXXXXX");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    snprintf(fx->path, sizeof fx->path, "%s/attention.png", fx->dir);
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

typedef struct rgb {
    int r, g, b;
} rgb;

static rgb pixel_at(cairo_surface_t *s, double x, double y) {
    const unsigned char *data = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);
    uint32_t v;
    memcpy(&v, data + (size_t)y * (size_t)stride + 4 * (size_t)x, sizeof v);
    rgb c = {(int)(v >> 16) & 0xff, (int)(v >> 8) & 0xff, (int)v & 0xff};
    return c;
}

static rgb cell_centre(cairo_surface_t *s, const vkg_heatmap_layout *l, int row, int col) {
    return pixel_at(s, l->grid_x + (col + 0.5) * l->cell, l->grid_y + (row + 0.5) * l->cell);
}

/* A causal pattern of n tokens: row i spreads its weight over columns 0..i, most on column 0 and
 * on the diagonal; columns above the diagonal are exactly 0. */
static float *causal_weights(int n) {
    float *w = calloc((size_t)n * (size_t)n, sizeof *w);
    assert_non_null(w);
    for (int i = 0; i < n; i++) {
        float sum = 0.0f;
        for (int j = 0; j <= i; j++) {
            w[i * n + j] = (j == 0 ? 4.0f : 1.0f) + (j == i ? 2.0f : 0.0f);
            sum += w[i * n + j];
        }
        for (int j = 0; j <= i; j++) w[i * n + j] /= sum;
    }
    return w;
}

static const char *const TOKENS[12] = {"The", " quick", " brown", " fox", " jumps", " over",
                                       " the", " lazy", " dog", ".", "\n", " It"};

static cairo_surface_t *load_png(const char *path) {
    cairo_surface_t *s = cairo_image_surface_create_from_png(path);
    assert_int_equal(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    return s;
}

static void test_causal_12_tokens(void **state) {
    fixture *fx = *state;
    enum { N = 12 };
    float *w = causal_weights(N);
    vkg_error err = {0};
    assert_int_equal(vkg_heatmap_write_png(fx->path, w, N, TOKENS, "layer 0, head 0", &err),
                     VKG_OK);
    vkg_heatmap_layout l;
    assert_int_equal(vkg_heatmap_measure(N, TOKENS, "layer 0, head 0", &l, &err), VKG_OK);

    cairo_surface_t *s = load_png(fx->path);
    assert_int_equal(cairo_image_surface_get_width(s), l.width);
    assert_int_equal(cairo_image_surface_get_height(s), l.height);
    assert_true(l.width <= 1600 && l.height <= 1600);
    assert_true(l.cell >= 32.0);          /* a few tokens get big cells */
    assert_int_equal(l.label_stride, 1);  /* and every label */
    assert_true(l.grid_x + N * l.cell < l.colorbar_x);
    assert_true(l.colorbar_x < l.width);

    /* (0, 0) holds weight 1, the maximum: dark blue. */
    rgb hot = cell_centre(s, &l, 0, 0);
    assert_true(hot.b > hot.r + 60 && hot.b > hot.g + 30 && hot.r < 40);
    /* Above the diagonal the weight is 0: white (Blues starts at #f7fbff). */
    rgb zero = cell_centre(s, &l, 0, N - 1);
    assert_true(zero.r >= 240 && zero.g >= 240 && zero.b >= 250);
    rgb zero2 = cell_centre(s, &l, 5, 6);
    assert_true(zero2.r >= 240 && zero2.g >= 240 && zero2.b >= 250);
    /* A middling weight (row 1: 4/7, 3/7) lies between, and more weight is darker. */
    rgb mid = cell_centre(s, &l, 1, 0), less = cell_centre(s, &l, 1, 1);
    assert_true(mid.r + mid.g < zero.r + zero.g && mid.r + mid.g > hot.r + hot.g);
    assert_true(mid.r + mid.g < less.r + less.g);

    /* The colour bar runs from the maximum colour at the top to white at the bottom. */
    double bar_mid_x = l.colorbar_x + 10.0;
    rgb bar_top = pixel_at(s, bar_mid_x, l.grid_y + 2.0);
    rgb bar_bottom = pixel_at(s, bar_mid_x, l.grid_y + N * l.cell - 2.0);
    assert_true(abs(bar_top.r - hot.r) <= 8 && abs(bar_top.b - hot.b) <= 8);
    assert_true(bar_bottom.r >= 235 && bar_bottom.b >= 245);

    /* Labels: dark text pixels left of row 3 (" fox") and below column 3. */
    int dark_left = 0, dark_below = 0;
    for (int x = 0; x < (int)l.grid_x - 6; x++) {
        rgb c = pixel_at(s, x, l.grid_y + 3.5 * l.cell);
        dark_left += c.r < 128;
    }
    for (int y = (int)(l.grid_y + N * l.cell) + 6; y < l.height; y++) {
        rgb c = pixel_at(s, l.grid_x + 3.5 * l.cell, y);
        dark_below += c.r < 128;
    }
    assert_true(dark_left > 0);
    assert_true(dark_below > 0);

    cairo_surface_destroy(s);
    free(w);
}

/* 64 tokens stay readable: cells of 16 px, every label drawn, image under 1600 px.  1024 (GPT-2's
 * context) fits too, with every k-th label. */
static void test_size_adapts(void **state) {
    fixture *fx = *state;
    enum { N = 64 };
    const char *labels[N];
    for (int i = 0; i < N; i++) labels[i] = TOKENS[i % 12];
    float *w = causal_weights(N);
    vkg_error err = {0};
    assert_int_equal(vkg_heatmap_write_png(fx->path, w, N, labels, "64 tokens", &err), VKG_OK);
    vkg_heatmap_layout l;
    assert_int_equal(vkg_heatmap_measure(N, labels, "64 tokens", &l, &err), VKG_OK);
    assert_true(l.cell >= 16.0);
    assert_int_equal(l.label_stride, 1);
    assert_true(l.width <= 1600 && l.height <= 1600);
    cairo_surface_t *s = load_png(fx->path);
    assert_int_equal(cairo_image_surface_get_width(s), l.width);
    rgb diag = cell_centre(s, &l, 2, 2), above = cell_centre(s, &l, 10, 40); /* 3/8 and 0 */
    assert_true(diag.r < above.r - 20);
    cairo_surface_destroy(s);
    free(w);

    assert_int_equal(vkg_heatmap_measure(1024, NULL, NULL, &l, &err), VKG_OK);
    assert_true(l.width <= 1600 && l.height <= 1600);
    assert_true(l.cell >= 1.0 && l.label_stride > 1);
}

/* Labels no font could draw as given (invalid UTF-8, half of a character, control characters,
 * a very long token) and NULL labels still give an image; a non-finite weight is grey. */
static void test_awkward_labels_and_values(void **state) {
    fixture *fx = *state;
    const char *labels[4] = {"\xf0\x9f", "\xff\xfe bad", "\t\r\x01\x7f", NULL};
    float w[16] = {1.0f, 0, 0, 0, 0.5f, 0.5f, 0, 0, NAN, 0.2f, 0.2f, 0, 0.25f, 0.25f, 0.25f, 0.25f};
    vkg_error err = {0};
    assert_int_equal(vkg_heatmap_write_png(fx->path, w, 4, labels, "\xc3(", &err), VKG_OK);
    vkg_heatmap_layout l;
    assert_int_equal(vkg_heatmap_measure(4, labels, "\xc3(", &l, &err), VKG_OK);
    cairo_surface_t *s = load_png(fx->path);
    rgb grey = cell_centre(s, &l, 2, 0);
    assert_int_equal(grey.r, 0xbb);
    assert_int_equal(grey.g, 0xbb);
    assert_int_equal(grey.b, 0xbb);
    cairo_surface_destroy(s);

    const char *long_label[1] = {"                                                              "
                                 "pneumonoultramicroscopicsilicovolcanoconiosis"};
    float one = 1.0f;
    assert_int_equal(vkg_heatmap_write_png(fx->path, &one, 1, long_label, NULL, &err), VKG_OK);
    /* All weights zero: scaled as if the maximum were 1, so everything is white. */
    float zeros[4] = {0};
    assert_int_equal(vkg_heatmap_write_png(fx->path, zeros, 2, NULL, NULL, &err), VKG_OK);
}

/* The heads of a layer as one grid: 12 panels of 64 tokens in 4 x 3, one shared scale (panel k
 * holds the causal pattern times (k + 1) / 12, so the same cell darkens from panel 0 to 11), one
 * colour bar as tall as the three rows, row labels left of the first column only. */
static void test_grid_12_heads_64_tokens(void **state) {
    fixture *fx = *state;
    enum { N = 64, K = 12 };
    const char *labels[N];
    for (int i = 0; i < N; i++) labels[i] = TOKENS[i % 12];
    float *one = causal_weights(N), *w = malloc((size_t)K * N * N * sizeof *w);
    assert_non_null(w);
    for (int k = 0; k < K; k++)
        for (int i = 0; i < N * N; i++) w[k * N * N + i] = one[i] * (float)(k + 1) / K;
    char titles[K][16];
    const char *panel_titles[K];
    for (int k = 0; k < K; k++) {
        snprintf(titles[k], sizeof titles[k], "head %d", k);
        panel_titles[k] = titles[k];
    }
    const char *title = "GPT-2 layer 4, every head";
    vkg_error err = {0};
    assert_int_equal(vkg_heatmap_grid_write_png(fx->path, w, K, N, labels, title, panel_titles, &err), VKG_OK);
    const char *keep = getenv("VKG_TEST_KEEP_PNG"); /* for looking at it */
    if (keep) assert_int_equal(vkg_heatmap_grid_write_png(keep, w, K, N, labels, title, panel_titles, &err), VKG_OK);
    vkg_heatmap_layout l;
    assert_int_equal(vkg_heatmap_grid_measure(K, N, labels, title, &l, &err), VKG_OK);
    assert_int_equal(l.panels, K);
    assert_int_equal(l.cols, 4);
    assert_int_equal(l.rows, 3);
    assert_true(l.cell == 7.0);
    assert_int_equal(l.label_stride, 2);
    assert_true(l.step_x > N * l.cell && l.step_y > N * l.cell);

    cairo_surface_t *s = load_png(fx->path);
    assert_int_equal(cairo_image_surface_get_width(s), l.width);
    assert_int_equal(cairo_image_surface_get_height(s), l.height);
    /* four panels a row, the bar beside them, three rows, the labels below */
    assert_true(l.width > l.grid_x + 4 * N * l.cell + 20 && l.width < 2400);
    assert_true(l.height > l.grid_y + 3 * N * l.cell + 40 && l.height < 2000);
    assert_true(l.colorbar_height == 2 * l.step_y + N * l.cell);

    /* (0, 0) of panel k: the shared scale makes it darker as k grows; panel 11's is the maximum */
    int last = 3 * 256;
    for (int k = 0; k < K; k++) {
        rgb c = pixel_at(s, l.grid_x + (k % 4) * l.step_x + 3, l.grid_y + (k / 4) * l.step_y + 3);
        assert_true(c.r + c.g + c.b < last);
        last = c.r + c.g + c.b;
    }
    rgb hot = pixel_at(s, l.grid_x + 3 * l.step_x + 3, l.grid_y + 2 * l.step_y + 3);
    rgb bar_top = pixel_at(s, l.colorbar_x + 10.0, l.grid_y + 2.0);
    rgb bar_bottom = pixel_at(s, l.colorbar_x + 10.0, l.grid_y + l.colorbar_height - 2.0);
    assert_true(abs(bar_top.r - hot.r) <= 8 && abs(bar_top.b - hot.b) <= 8);
    assert_true(bar_bottom.r >= 235 && bar_bottom.b >= 245);
    /* above the diagonal: white in every panel */
    rgb zero = pixel_at(s, l.grid_x + l.step_x + 40.5 * l.cell, l.grid_y + l.step_y + 10.5 * l.cell);
    assert_true(zero.r >= 240 && zero.b >= 250);

    /* row labels (dark pixels) left of the first column, none in the gap between columns 0 and 1 */
    int dark_left = 0, dark_gap = 0;
    for (int x = 0; x < (int)l.grid_x - 6; x++) dark_left += pixel_at(s, x, l.grid_y + 2.5 * l.cell).r < 128;
    for (int x = (int)(l.grid_x + N * l.cell) + 2; x < (int)(l.grid_x + l.step_x) - 6; x++) /* not the ticks */
        dark_gap += pixel_at(s, x, l.grid_y + 2.5 * l.cell).r < 128;
    assert_true(dark_left > 0);
    assert_int_equal(dark_gap, 0);
    /* a panel title above panel 1 */
    int dark_title = 0;
    for (int x = (int)(l.grid_x + l.step_x); x < (int)(l.grid_x + l.step_x + N * l.cell); x++)
        dark_title += pixel_at(s, x, l.grid_y - 6.0 - 6.5).r < 128;
    assert_true(dark_title > 0);
    cairo_surface_destroy(s);

    /* one panel is the plain heatmap; 0 or too many panels are refused */
    vkg_heatmap_layout one_l;
    assert_int_equal(vkg_heatmap_grid_measure(1, N, labels, title, &one_l, &err), VKG_OK);
    assert_int_equal(vkg_heatmap_measure(N, labels, title, &l, &err), VKG_OK);
    assert_memory_equal(&one_l, &l, sizeof l);
    assert_int_equal(vkg_heatmap_grid_write_png(fx->path, w, 0, N, labels, NULL, NULL, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "0 panels"));
    free(w);
    free(one);
}

static void test_errors(void **state) {
    fixture *fx = *state;
    float w[4] = {1, 0, 0.5f, 0.5f};
    vkg_error err = {0};
    assert_int_equal(vkg_heatmap_write_png(fx->path, w, 0, NULL, NULL, &err),
                     VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "0 tokens"));
    assert_int_equal(vkg_heatmap_write_png(fx->path, w, -3, NULL, NULL, &err),
                     VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_heatmap_write_png(fx->path, NULL, 2, NULL, NULL, &err),
                     VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "weights"));

    char bad_path[200];
    snprintf(bad_path, sizeof bad_path, "%s/missing/dir/a.png", fx->dir);
    assert_int_equal(vkg_heatmap_write_png(bad_path, w, 2, NULL, NULL, &err), VKG_ERR_IO);
    assert_int_equal(err.status, VKG_ERR_IO);
    assert_non_null(strstr(err.message, bad_path));
    assert_int_equal(access(bad_path, F_OK), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_causal_12_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_adapts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_awkward_labels_and_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grid_12_heads_64_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
