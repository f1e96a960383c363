/* Attention heatmaps drawn with cairo; what the picture shows is described in heatmap.h. */
#include "vkgraph_heatmap.h"

#include "base/error.h"

#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_TOKENS = 8192,         /* more is surely a mistake; 1024 is GPT-2's context         */
    MAX_PANELS = 256,          /* heads of one layer; the largest GPT-2 has 25              */
    GRID_TARGET_PX = 1024,     /* the grid's side once cells have shrunk to fit             */
    CELL_MAX_PX = 48,          /* a few tokens still make a picture of sensible size        */
    PANEL_TARGET_PX = 480,     /* one panel's side in a grid of several                     */
    PANELS_WIDTH_PX = 2048,    /* ... and all the columns of panels together, at most        */
    PANEL_CELL_MAX_PX = 32,
    LABEL_MAX_CHARS = 16,      /* longer labels are cut to 15 characters and an ellipsis    */
    TITLE_MAX_CHARS = 160,
    /* UTF-8 bytes of a prepared string: 4 per character at most, and a NUL */
    LABEL_BYTES = 4 * LABEL_MAX_CHARS + 4,
    TITLE_BYTES = 4 * TITLE_MAX_CHARS + 4
};

/* Layout constants in pixels. */
#define MARGIN 16.0
#define TICK_LEN 4.0
#define LABEL_PAD 3.0
#define AXIS_FONT 14.0
#define AXIS_TITLE_GAP 8.0
#define TITLE_FONT 18.0
#define TITLE_GAP 14.0
#define TITLE_MIN_FONT 11.0
#define IMAGE_MAX_PX 1600.0
#define BAR_GAP 24.0
#define BAR_WIDTH 20.0
#define PANEL_GAP 16.0
#define PANEL_TITLE_FONT 13.0
#define PANEL_TITLE_GAP 6.0
#define LABEL_MAX_FONT 14.0
#define LABEL_MIN_FONT 8.0
#define STRIDED_LABEL_MAX_FONT 11.0 /* labels of every k-th token may grow into the room left */
#define FONT_FAMILY "DejaVu Sans"
#define QUARTER_TURN 1.57079632679489661923 /* M_PI is not in strict C11 */

/* ---------------------------------------------------------------------------------------------
 * Colours: matplotlib's "Blues" is ColorBrewer's 9-class sequential Blues interpolated linearly.
 * ------------------------------------------------------------------------------------------- */

static const unsigned char BLUES[9][3] = {
    {0xf7, 0xfb, 0xff}, {0xde, 0xeb, 0xf7}, {0xc6, 0xdb, 0xef}, {0x9e, 0xca, 0xe1}, {0x6b, 0xae, 0xd6},
    {0x42, 0x92, 0xc6}, {0x21, 0x71, 0xb5}, {0x08, 0x51, 0x9c}, {0x08, 0x30, 0x6b},
};
static const double TEXT_GREY = 0.15, FRAME_GREY = 0.35;
static const uint32_t NON_FINITE_RGB = 0xbbbbbb;

/* t in [0, 1] -> 0x00RRGGBB, the pixel layout of CAIRO_FORMAT_RGB24. */
static uint32_t blues_rgb(double t) {
    if (!(t > 0.0)) t = 0.0;
    if (t > 1.0) t = 1.0;
    double pos = t * 8.0;
    int k = (int)pos;
    if (k > 7) k = 7;
    double f = pos - k;
    uint32_t rgb = 0;
    for (int c = 0; c < 3; c++) {
        double v = BLUES[k][c] + f * (BLUES[k + 1][c] - BLUES[k][c]);
        rgb = (rgb << 8) | (uint32_t)lround(v);
    }
    return rgb;
}

/* ---------------------------------------------------------------------------------------------
 * Text: labels made drawable.  cairo's text calls refuse invalid UTF-8 (and then refuse every
 * later call), and a GPT-2 token can be half of a character, so every string is re-encoded.
 * ------------------------------------------------------------------------------------------- */

/* Copies in to out (4 * max_chars + 1 bytes) as valid UTF-8 with visible control characters, at most
 * max_chars code points; mark_leading_spaces draws each leading space as '␣'. */
static void prepare_text(const char *in, char *out, int max_chars, int mark_leading_spaces) {
    size_t len = strlen(in), pos = 0, o = 0;
    int chars = 0, leading = mark_leading_spaces;
    while (pos < len) {
        uint32_t cp;
        pos += vkg_utf8_decode(in + pos, len - pos, &cp);
        if (cp == VKG_UTF8_INVALID) cp = 0xfffd; /* '�' */
        if (chars == max_chars - 1 && pos < len) {
            o += vkg_utf8_encode(0x2026, out + o); /* '…': there is more than fits */
            break;
        }
        if (cp != ' ') leading = 0;
        /* Symbols the font (DejaVu Sans) has; it lacks Unicode's control pictures. */
        if (leading) cp = 0x2423;                   /* '␣'                            */
        else if (cp == '\n') cp = 0x21b5;           /* '↵'                            */
        else if (cp == '\t') cp = 0x21e5;           /* '⇥'                            */
        else if (cp == '\r') cp = 0x2190;           /* '←'                            */
        else if (cp < 0x20 || cp == 0x7f) cp = 0x2b1a; /* '⬚': another control character */
        o += vkg_utf8_encode(cp, out + o);
        chars++;
    }
    out[o] = '\0';
}

static void set_font(cairo_t *cr, double size, int bold) {
    cairo_select_font_face(cr, FONT_FAMILY, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

static double text_width(cairo_t *cr, const char *s) {
    cairo_text_extents_t ext;
    cairo_text_extents(cr, s, &ext);
    return ext.x_advance;
}

/* Offset from a point to the baseline that centres capital letters on that point vertically, so
 * all labels share one baseline whatever their descenders. */
static double baseline_offset(cairo_t *cr) {
    cairo_text_extents_t ext;
    cairo_text_extents(cr, "X", &ext);
    return -(ext.y_bearing / 2.0);
}

/* Draws s with its left (align 0), centre (0.5) or right (1) end at x, centred on y. */
static void draw_text(cairo_t *cr, const char *s, double x, double y, double align) {
    cairo_move_to(cr, x - align * text_width(cr, s), y + baseline_offset(cr));
    cairo_show_text(cr, s);
}

/* Cuts s to fit in room pixels, ending in '…'; s has room for 3 bytes beyond its length. */
static void fit_text(cairo_t *cr, char *s, double room) {
    size_t len = strlen(s);
    if (text_width(cr, s) <= room) return;
    do {
        while (len > 0 && ((unsigned char)s[len - 1] & 0xc0) == 0x80) len--; /* continuations */
        if (len > 0) len--;                                                  /* the lead byte */
        memcpy(s + len, "\xe2\x80\xa6", 4);                                  /* '…' and NUL  */
    } while (len > 0 && text_width(cr, s) > room);
}

/* ---------------------------------------------------------------------------------------------
 * Layout
 * ------------------------------------------------------------------------------------------- */

typedef struct heatmap_plan {
    vkg_heatmap_layout layout;
    int grid_px;                 /* side of one panel, an integer so cells map to pixels  */
    double label_font;
    double label_width;          /* widest prepared label                                 */
    char *labels;                /* n prepared labels, LABEL_BYTES each                   */
    char title[TITLE_BYTES];
    double title_font;
    double panel_title_h;        /* room above each panel for its title (0 for one panel)  */
} heatmap_plan;

static const char *plan_label(const heatmap_plan *p, int i) {
    return p->labels + (size_t)i * LABEL_BYTES;
}

/* Top-left corner of panel k's cell (0, 0). */
static void panel_origin(const vkg_heatmap_layout *l, int k, double *x, double *y) {
    *x = l->grid_x + (k % l->cols) * l->step_x;
    *y = l->grid_y + (k / l->cols) * l->step_y;
}

/* Prepares the labels and fixes every position; cr is any context, used to measure text.  Panels
 * share their axes, as matplotlib's sharex/sharey: row labels left of the first column, column
 * labels below each panel that has none below it. */
static vkg_status plan_layout(heatmap_plan *p, cairo_t *cr, int panels, int n, const char *const *labels,
                              const char *title, vkg_error *err) {
    memset(p, 0, sizeof *p);
    p->labels = malloc((size_t)n * LABEL_BYTES);
    if (!p->labels)
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "heatmap: labels of %d tokens", n);
    vkg_heatmap_layout *l = &p->layout;
    l->panels = panels;
    l->cols = (int)ceil(sqrt((double)panels));
    l->rows = (panels + l->cols - 1) / l->cols;

    /* Integer cells up to the target side; beyond that several tokens share a pixel. */
    int target = GRID_TARGET_PX, cell_max = CELL_MAX_PX;
    if (panels > 1) {
        target = PANELS_WIDTH_PX / l->cols < PANEL_TARGET_PX ? PANELS_WIDTH_PX / l->cols : PANEL_TARGET_PX;
        cell_max = PANEL_CELL_MAX_PX;
    }
    int cell = target / n;
    if (cell > cell_max) cell = cell_max;
    p->grid_px = cell >= 1 ? cell * n : target;
    l->cell = (double)p->grid_px / n;
    p->label_font = fmin(LABEL_MAX_FONT, fmax(LABEL_MIN_FONT, 0.7 * l->cell));
    l->label_stride = (int)ceil(1.25 * p->label_font / l->cell);
    /* Labelling every k-th token leaves k cells per label: the font may use them. */
    if (l->label_stride > 1)
        p->label_font = fmax(p->label_font, fmin(STRIDED_LABEL_MAX_FONT, l->label_stride * l->cell / 1.25));

    set_font(cr, p->label_font, 0);
    for (int i = 0; i < n; i++) {
        char *out = p->labels + (size_t)i * LABEL_BYTES;
        if (labels && labels[i]) {
            prepare_text(labels[i], out, LABEL_MAX_CHARS, 1);
        } else {
            snprintf(out, LABEL_BYTES, "%d", i);
        }
        if (i % l->label_stride == 0) p->label_width = fmax(p->label_width, text_width(cr, out));
    }
    p->title[0] = '\0';
    if (title) prepare_text(title, p->title, TITLE_MAX_CHARS, 0);
    p->panel_title_h = panels > 1 ? PANEL_TITLE_FONT + PANEL_TITLE_GAP : 0.0;

    /* Left to right: margin, "token", row labels, ticks, the panels, colour bar, its tick labels
     * (room for "0.0000", the longest a tick usually gets). */
    double bar_labels_w = text_width(cr, "0.0000") + TICK_LEN + LABEL_PAD;
    double axis_title_h = AXIS_FONT + AXIS_TITLE_GAP;
    double left_w = axis_title_h + p->label_width + LABEL_PAD + TICK_LEN;
    l->step_x = p->grid_px + (panels > 1 ? PANEL_GAP : 0.0);
    l->step_y = p->grid_px + (panels > 1 ? PANEL_GAP + p->panel_title_h : 0.0);
    double panels_w = l->cols * (double)p->grid_px + (l->cols - 1) * PANEL_GAP;
    double panels_h = l->rows * (double)p->grid_px + (l->rows - 1) * (PANEL_GAP + p->panel_title_h);
    double content_w = left_w + panels_w + BAR_GAP + BAR_WIDTH + bar_labels_w;
    double width = content_w + 2 * MARGIN;

    /* A long title widens the image up to IMAGE_MAX_PX, then shrinks, then loses its end. */
    p->title_font = TITLE_FONT;
    if (p->title[0]) {
        set_font(cr, TITLE_FONT, 1);
        double tw = text_width(cr, p->title);
        width = fmax(width, fmin(tw + 2 * MARGIN, fmax(IMAGE_MAX_PX, width)));
        double room = width - 2 * MARGIN;
        if (tw > room) {
            p->title_font = fmax(TITLE_MIN_FONT, TITLE_FONT * room / tw);
            set_font(cr, p->title_font, 1);
            fit_text(cr, p->title, room);
        }
    }

    double title_h = p->title[0] ? TITLE_FONT + TITLE_GAP : 0.0;
    l->grid_x = round((width - content_w) / 2.0 + left_w);
    l->grid_y = round(MARGIN + title_h + p->panel_title_h);
    l->step_x = round(l->step_x);
    l->step_y = round(l->step_y);
    l->colorbar_x = l->grid_x + panels_w + BAR_GAP;
    l->colorbar_height = panels_h;
    double height = l->grid_y + panels_h + TICK_LEN + LABEL_PAD + p->label_width + axis_title_h + MARGIN;
    l->width = (int)ceil(width);
    l->height = (int)ceil(height);
    return VKG_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Drawing
 * ------------------------------------------------------------------------------------------- */

/* One panel's cells, written as pixels: exact colours, crisp edges, and fast for 1024 tokens. */
static void draw_cells(cairo_surface_t *surface, const heatmap_plan *p, int k, const float *weights,
                       int n, double vmax) {
    cairo_surface_flush(surface);
    unsigned char *data = cairo_image_surface_get_data(surface);
    int stride = cairo_image_surface_get_stride(surface);
    double px, py;
    panel_origin(&p->layout, k, &px, &py);
    int x0 = (int)px, y0 = (int)py, side = p->grid_px;
    for (int y = 0; y < side; y++) {
        uint32_t *row = (uint32_t *)(void *)(data + (size_t)(y0 + y) * (size_t)stride) + x0;
        int i = (int)((int64_t)y * n / side);
        for (int x = 0; x < side; x++) {
            int j = (int)((int64_t)x * n / side);
            float w = weights[(size_t)i * (size_t)n + (size_t)j];
            row[x] = isfinite(w) ? blues_rgb(w / vmax) : NON_FINITE_RGB;
        }
    }
    cairo_surface_mark_dirty(surface);
}

/* Panel k's frame, its ticks and labels (rows in the first column, columns where no panel is
 * below), and its title. */
static void draw_panel_axes(cairo_t *cr, const heatmap_plan *p, int k, int n, const char *panel_title) {
    const vkg_heatmap_layout *l = &p->layout;
    double gx, gy, side = p->grid_px;
    panel_origin(l, k, &gx, &gy);
    int rows_labelled = k % l->cols == 0, cols_labelled = k + l->cols >= l->panels;

    cairo_set_line_width(cr, 1.0);
    cairo_set_source_rgb(cr, FRAME_GREY, FRAME_GREY, FRAME_GREY);
    cairo_rectangle(cr, gx - 0.5, gy - 0.5, side + 1.0, side + 1.0);
    cairo_stroke(cr);

    set_font(cr, p->label_font, 0);
    for (int i = 0; i < n; i += l->label_stride) {
        /* the cell's centre on a half pixel, so that 1 px ticks are crisp (gx, gy are whole) */
        double centre = floor((i + 0.5) * l->cell) + 0.5;
        cairo_set_source_rgb(cr, FRAME_GREY, FRAME_GREY, FRAME_GREY);
        cairo_move_to(cr, gx - 0.5, gy + centre); /* row tick on the left */
        cairo_line_to(cr, gx - 0.5 - TICK_LEN, gy + centre);
        cairo_move_to(cr, gx + centre, gy + side + 0.5); /* column tick below */
        cairo_line_to(cr, gx + centre, gy + side + 0.5 + TICK_LEN);
        cairo_stroke(cr);

        cairo_set_source_rgb(cr, TEXT_GREY, TEXT_GREY, TEXT_GREY);
        if (rows_labelled) draw_text(cr, plan_label(p, i), gx - TICK_LEN - LABEL_PAD, gy + (i + 0.5) * l->cell, 1.0);
        if (!cols_labelled) continue;
        /* Column labels read bottom to top, their end at the tick (matplotlib's rotation=90). */
        cairo_save(cr);
        cairo_translate(cr, gx + (i + 0.5) * l->cell, gy + side + TICK_LEN + LABEL_PAD);
        cairo_rotate(cr, -QUARTER_TURN);
        draw_text(cr, plan_label(p, i), 0.0, 0.0, 1.0);
        cairo_restore(cr);
    }
    if (panel_title) {
        char text[TITLE_BYTES];
        prepare_text(panel_title, text, TITLE_MAX_CHARS, 0);
        set_font(cr, PANEL_TITLE_FONT, 1);
        fit_text(cr, text, side + PANEL_GAP);
        cairo_set_source_rgb(cr, TEXT_GREY, TEXT_GREY, TEXT_GREY);
        draw_text(cr, text, gx + side / 2.0, gy - PANEL_TITLE_GAP - PANEL_TITLE_FONT / 2.0, 0.5);
    }
}

/* The axis titles and the image's title, over every panel. */
static void draw_titles(cairo_t *cr, const heatmap_plan *p) {
    const vkg_heatmap_layout *l = &p->layout;
    double gx = l->grid_x, gy = l->grid_y;
    double panels_w = l->colorbar_x - BAR_GAP - gx, panels_h = l->colorbar_height;

    set_font(cr, AXIS_FONT, 0);
    cairo_set_source_rgb(cr, TEXT_GREY, TEXT_GREY, TEXT_GREY);
    double below_labels = gy + panels_h + TICK_LEN + LABEL_PAD + p->label_width + AXIS_TITLE_GAP;
    draw_text(cr, "attends to", gx + panels_w / 2.0, below_labels + AXIS_FONT / 2.0, 0.5);
    cairo_save(cr);
    double left_of_labels = gx - TICK_LEN - LABEL_PAD - p->label_width - AXIS_TITLE_GAP;
    cairo_translate(cr, left_of_labels - AXIS_FONT / 2.0, gy + panels_h / 2.0);
    cairo_rotate(cr, -QUARTER_TURN);
    draw_text(cr, "token", 0.0, 0.0, 0.5);
    cairo_restore(cr);

    if (p->title[0]) {
        set_font(cr, p->title_font, 1);
        double tw = text_width(cr, p->title);
        double centre = gx + panels_w / 2.0;
        /* centred over the panels when that fits in the image, else over the image */
        if (centre - tw / 2.0 < MARGIN || centre + tw / 2.0 > l->width - MARGIN)
            centre = l->width / 2.0;
        draw_text(cr, p->title, centre, MARGIN + p->title_font / 2.0, 0.5);
    }
}

/* A step of 1, 2, 2.5 or 5 times a power of ten giving about five ticks from 0 to vmax. */
static double tick_step(double vmax, int *decimals) {
    double raw = vmax / 5.0;
    double magnitude = pow(10.0, floor(log10(raw)));
    double f = raw / magnitude;
    double mult = f < 1.5 ? 1.0 : f < 2.25 ? 2.0 : f < 3.5 ? 2.5 : f < 7.5 ? 5.0 : 10.0;
    double step = mult * magnitude;
    *decimals = 0;
    while (*decimals < 8) {
        double scaled = step * pow(10.0, *decimals);
        if (fabs(scaled - round(scaled)) < 1e-6 * fmax(1.0, scaled)) break;
        (*decimals)++;
    }
    return step;
}

/* One colour bar for every panel: they share one scale. */
static void draw_colorbar(cairo_t *cr, const heatmap_plan *p, double vmax) {
    const vkg_heatmap_layout *l = &p->layout;
    double x = l->colorbar_x, y = l->grid_y, h = l->colorbar_height;

    /* The same stops as the cells, so cairo's linear interpolation is the colour map. */
    cairo_pattern_t *ramp = cairo_pattern_create_linear(0.0, y + h, 0.0, y);
    for (int k = 0; k < 9; k++)
        cairo_pattern_add_color_stop_rgb(ramp, k / 8.0, BLUES[k][0] / 255.0, BLUES[k][1] / 255.0,
                                         BLUES[k][2] / 255.0);
    cairo_rectangle(cr, x, y, BAR_WIDTH, h);
    cairo_set_source(cr, ramp);
    cairo_fill(cr);
    cairo_pattern_destroy(ramp);

    cairo_set_line_width(cr, 1.0);
    cairo_set_source_rgb(cr, FRAME_GREY, FRAME_GREY, FRAME_GREY);
    cairo_rectangle(cr, x - 0.5, y - 0.5, BAR_WIDTH + 1.0, h + 1.0);
    cairo_stroke(cr);

    int decimals;
    double step = tick_step(vmax, &decimals);
    set_font(cr, p->label_font, 0);
    for (int k = 0; k * step <= vmax * (1.0 + 1e-9); k++) {
        double value = k * step;
        double ty = floor(y + h - value / vmax * h) + 0.5;
        if (ty > y + h) ty = y + h - 0.5;
        cairo_set_source_rgb(cr, FRAME_GREY, FRAME_GREY, FRAME_GREY);
        cairo_move_to(cr, x + BAR_WIDTH + 0.5, ty);
        cairo_line_to(cr, x + BAR_WIDTH + 0.5 + TICK_LEN, ty);
        cairo_stroke(cr);
        char text[32];
        snprintf(text, sizeof text, "%.*f", decimals, value);
        cairo_set_source_rgb(cr, TEXT_GREY, TEXT_GREY, TEXT_GREY);
        draw_text(cr, text, x + BAR_WIDTH + TICK_LEN + LABEL_PAD, ty, 0.0);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------------------------- */

static vkg_status check_sizes(int panels, int n, vkg_error *err) {
    if (n <= 0 || n > MAX_TOKENS)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "heatmap: %d tokens; need 1 to %d", n, MAX_TOKENS);
    if (panels <= 0 || panels > MAX_PANELS)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "heatmap: %d panels; need 1 to %d", panels, MAX_PANELS);
    return VKG_OK;
}

/* Runs plan_layout with a scratch context for measuring text. */
static vkg_status plan_with_scratch(heatmap_plan *p, int panels, int n, const char *const *labels,
                                    const char *title, vkg_error *err) {
    cairo_surface_t *scratch = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
    cairo_t *cr = cairo_create(scratch);
    vkg_status st = plan_layout(p, cr, panels, n, labels, title, err);
    cairo_destroy(cr);
    cairo_surface_destroy(scratch);
    return st;
}

vkg_status vkg_heatmap_grid_measure(int panels, int n, const char *const *labels, const char *title,
                                    vkg_heatmap_layout *layout, vkg_error *err) {
    vkg_status st = check_sizes(panels, n, err);
    if (st != VKG_OK) return st;
    heatmap_plan plan;
    st = plan_with_scratch(&plan, panels, n, labels, title, err);
    if (st == VKG_OK && layout) *layout = plan.layout;
    free(plan.labels);
    return st;
}

vkg_status vkg_heatmap_measure(int n, const char *const *labels, const char *title,
                               vkg_heatmap_layout *layout, vkg_error *err) {
    return vkg_heatmap_grid_measure(1, n, labels, title, layout, err);
}

static cairo_status_t write_to_file(void *closure, const unsigned char *data, unsigned int length) {
    return fwrite(data, 1, length, (FILE *)closure) == length ? CAIRO_STATUS_SUCCESS
                                                               : CAIRO_STATUS_WRITE_ERROR;
}

static vkg_status save_png(cairo_surface_t *surface, const char *path, vkg_error *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    cairo_status_t cs = cairo_surface_write_to_png_stream(surface, write_to_file, f);
    int saved_errno = errno;
    int closed = fclose(f) == 0;
    if (cs != CAIRO_STATUS_SUCCESS || !closed) {
        remove(path);
        return vkg_error_set(err, VKG_ERR_IO, "cannot write %s: %s", path,
                             cs != CAIRO_STATUS_SUCCESS && cs != CAIRO_STATUS_WRITE_ERROR
                                 ? cairo_status_to_string(cs)
                                 : strerror(closed ? saved_errno : errno));
    }
    return VKG_OK;
}

vkg_status vkg_heatmap_grid_write_png(const char *path, const float *weights, int panels, int n,
                                      const char *const *labels, const char *title,
                                      const char *const *panel_titles, vkg_error *err) {
    vkg_status st = check_sizes(panels, n, err);
    if (st != VKG_OK) return st;
    if (!path || !weights)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "heatmap: %s is NULL",
                             !path ? "the path" : "the weights");

    const size_t per_panel = (size_t)n * (size_t)n;
    double vmax = 0.0;
    for (size_t k = 0; k < (size_t)panels * per_panel; k++)
        if (isfinite(weights[k]) && weights[k] > vmax) vmax = weights[k];
    if (vmax <= 0.0) vmax = 1.0;

    heatmap_plan plan;
    st = plan_with_scratch(&plan, panels, n, labels, title, err);
    if (st != VKG_OK) {
        free(plan.labels);
        return st;
    }
    cairo_surface_t *surface =
        cairo_image_surface_create(CAIRO_FORMAT_RGB24, plan.layout.width, plan.layout.height);
    if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(surface);
        free(plan.labels);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "heatmap: %dx%d image", plan.layout.width,
                             plan.layout.height);
    }
    cairo_t *cr = cairo_create(surface);
    cairo_set_source_rgb(cr, 1.0, 1.0, 1.0);
    cairo_paint(cr);
    for (int k = 0; k < panels; k++) {
        draw_cells(surface, &plan, k, weights + (size_t)k * per_panel, n, vmax);
        draw_panel_axes(cr, &plan, k, n, panel_titles ? panel_titles[k] : NULL);
    }
    draw_titles(cr, &plan);
    draw_colorbar(cr, &plan, vmax);
    cairo_status_t drawn = cairo_status(cr);
    cairo_destroy(cr);
    free(plan.labels);
    if (drawn != CAIRO_STATUS_SUCCESS)
        st = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "heatmap %s: drawing failed: %s", path,
                           cairo_status_to_string(drawn));
    else
        st = save_png(surface, path, err);
    cairo_surface_destroy(surface);
    return st;
}

vkg_status vkg_heatmap_write_png(const char *path, const float *weights, int n,
                                 const char *const *labels, const char *title, vkg_error *err) {
    return vkg_heatmap_grid_write_png(path, weights, 1, n, labels, title, NULL, err);
}
