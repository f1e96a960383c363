/*
 * Attention heatmaps as PNG images, drawn with cairo in the manner of matplotlib's
 * imshow(weights, cmap="Blues"): one square cell per (query token, attended token) pair, white for
 * 0 and dark blue for the largest weight, query tokens labelled down the left, attended tokens
 * along the bottom (rotated), a title on top and a colour bar with ticks on the right.
 *
 * Labels are token strings as a tokenizer decodes them.  So that GPT-2's word-initial space can be
 * seen, each leading space is drawn as '␣' (U+2423).  Control characters are drawn as visible
 * symbols ('\n' as '↵', '\t' as '⇥', '\r' as '←', any other as '⬚'), bytes that are not valid
 * UTF-8 (a token may hold half of a multi-byte character) as '�', and labels longer than 16
 * characters are cut to 15 and '…'.  Nothing else is escaped or changed.  Text is drawn in
 * DejaVu Sans through cairo's simple text API, which does not fall back to other fonts: a
 * character DejaVu Sans lacks (most emoji) shows as an empty box.
 *
 * Size: cells are 48 px for a few tokens, shrinking as n grows so the grid stays near 1024 px;
 * 64 tokens get 16 px cells with 11 px labels and the whole image stays under 1600 px.  When
 * cells get too small for every label, every k-th token is labelled, in a font that uses the
 * room this leaves (up to 11 px).
 *
 * A grid puts several patterns over the same tokens (the heads of one layer) side by side:
 * ceil(sqrt(k)) panels a row, each titled, all on one colour scale with one colour bar, the axes
 * shared as matplotlib's sharex/sharey (row labels left of the first column, column labels below
 * each panel with none below it).  Panels are about 480 px (at most 2048 px for a row of them):
 * 64 tokens get 7 px cells and every second token labelled in 11 px; 12 heads make a 4 x 3 grid.
 */
#ifndef VKGRAPH_HEATMAP_H
#define VKGRAPH_HEATMAP_H

#include "vkgraph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where things land in the image, in pixels (for tests and for callers that annotate). */
typedef struct vkg_heatmap_layout {
    int width, height;          /* of the whole image                                    */
    double grid_x, grid_y;      /* top-left corner of cell (0, 0)                         */
    double cell;                /* side of one cell                                       */
    double colorbar_x;          /* left edge of the colour bar; it spans the grid's height */
    int label_stride;           /* every label_stride-th token is labelled                */
    int panels, cols, rows;     /* a grid's panels (1 for one heatmap), cols x rows of them */
    double step_x, step_y;      /* panel k's cell (0, 0) is at grid_x + (k % cols) * step_x,
                                   grid_y + (k / cols) * step_y                           */
    double colorbar_height;     /* from grid_y down to the last row's bottom edge          */
} vkg_heatmap_layout;

/* weights: [n][n] row-major, row = query token, column = attended token.  labels: n UTF-8 strings
 * (NULL, or a NULL entry, labels by index).  title may be NULL.  Values are scaled from 0 to the
 * largest weight (1 when every weight is <= 0); negative values draw as 0 and non-finite ones as
 * grey.  Fails with VKG_ERR_INVALID_ARGUMENT for n <= 0 (or absurdly large) or NULL weights,
 * VKG_ERR_IO when the file cannot be written. */
vkg_status vkg_heatmap_write_png(const char *path, const float *weights, int n,
                                 const char *const *labels, const char *title, vkg_error *err);

/* The layout vkg_heatmap_write_png uses for these labels and title, without drawing. */
vkg_status vkg_heatmap_measure(int n, const char *const *labels, const char *title,
                               vkg_heatmap_layout *layout, vkg_error *err);

/* panels patterns [panels][n][n] as one image; panel_titles: panels strings, or NULL.  The
 * scale runs from 0 to the largest weight of all panels.  Errors as vkg_heatmap_write_png, and
 * VKG_ERR_INVALID_ARGUMENT for panels outside 1 to 256. */
vkg_status vkg_heatmap_grid_write_png(const char *path, const float *weights, int panels, int n,
                                      const char *const *labels, const char *title,
                                      const char *const *panel_titles, vkg_error *err);
vkg_status vkg_heatmap_grid_measure(int panels, int n, const char *const *labels, const char *title,
                                    vkg_heatmap_layout *layout, vkg_error *err);

#ifdef __cplusplus
}
#endif
#endif
