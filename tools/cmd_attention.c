/* `vkgraph attention`: which earlier token each head attends to most, printed as the attention
 * lesson prints it, for one layer or every layer; the probabilities as .npy; and heatmaps, of
 * one head or of every head of a layer as a grid.  Every layer comes from one forward pass. */
#include "cli.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "vkgraph_heatmap.h"
#include "vkgraph_lesson.h"
#include "vkgraph_npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "attention"
#define ALL (-1L)

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph attention -m DIR (-p TEXT | -f FILE | --ids IDS) --layer L|all [--head H|all]\n"
            "                         [--token TEXT | --position I] [--png OUT.png] [--npy OUT.npy] [--device D]\n"
            "\n"
            "Runs the model over the prompt and prints, for one token and every head of layer L (or of every\n"
            "layer), the earlier token it attends to most (the first token left out, as it soaks up\n"
            "attention) and the weight:\n"
            "\n"
            "    12 layers; 12 heads per layer\n"
            "    layer 4: ' it' at position 8\n"
            "    head  3: ' it' attends most to ' animal'    (0.85)\n"
            "\n"
            "Layers and heads are numbered from 0 everywhere: --layer 4 is printed \"layer 4\" (the fifth\n"
            "layer), names the file FILE-layer04.png and the picture \"layer 4\", as vkgraph lesson, profile\n"
            "and dump do.  Every layer comes from one forward pass.\n"
            "A model folder written by vkgraph random or gpt2-random is labelled RANDOM WEIGHTS everywhere.\n"
            "\n");
    gpt2_cli_usage_common(f);
    fprintf(f,
            "  --layer L|all       the layer's index, or every layer (required)\n"
            "  --head H|all        the head for --png and --npy (default all)\n"
            "  --token TEXT        the first token that decodes to TEXT, e.g. \" it\" (default: the last token)\n"
            "  --position I        the token at position I, from 0\n"
            "  --png FILE.png      a heatmap of head H over the whole prompt, or with --head all a grid of\n"
            "                      every head on one colour scale; with --layer all one image per layer,\n"
            "                      FILE-layerI.png for layer I, I zero-padded to the width of the last\n"
            "                      (a-layer00.png ... a-layer11.png for 12 layers, so that they sort)\n"
            "  --npy FILE.npy      the probabilities as float32: [layers, heads, T, T] with --layer all,\n"
            "                      else [heads, T, T]; one --head H drops the heads axis\n"
            "  -h, --help          show this help\n");
}

typedef struct attn_options {
    const char *layer, *head, *position; /* as given; checked once the model and prompt are known */
    const char *token, *png, *npy;
} attn_options;

/* What the options chose, checked. */
typedef struct attn_choice {
    long layer, head; /* an index, or ALL */
    long it;          /* the token whose row the table reads */
} attn_choice;

static int own_option(attn_options *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char **text = NULL;
    if (strcmp(a, "--layer") == 0) text = &o->layer;
    else if (strcmp(a, "--head") == 0) text = &o->head;
    else if (strcmp(a, "--position") == 0) text = &o->position;
    else if (strcmp(a, "--token") == 0) text = &o->token;
    else if (strcmp(a, "--png") == 0) text = &o->png;
    else if (strcmp(a, "--npy") == 0) text = &o->npy;
    else return 0;
    const char *val = cli_value(CMD, argc, argv, i);
    if (!val) return -1;
    if (*text) return cli_fail(CMD, "%s given twice", a), -1;
    *text = val;
    return 1;
}

/* text as an index in [0, count), or "all" where allowed; the message names the true range:
 * "--layer 12: must be 0 to 11 (the model has 12 layers) or all".  0, or 1 after it. */
static int parse_index(const char *opt, const char *text, int count, const char *whose, const char *unit,
                       int allow_all, long *out) {
    if (allow_all && strcmp(text, "all") == 0) {
        *out = ALL;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < 0 || v >= count)
        return cli_fail(CMD, "%s %s: must be 0 to %d (%s %d %s%s)%s", opt, text, count - 1, whose, count, unit,
                        count == 1 ? "" : "s", allow_all ? " or all" : "");
    *out = v;
    return 0;
}

/* The position --token or --position names (default: the last).  -1 after printing an error. */
static long chosen_position(const gpt2_cli *c, const attn_options *o) {
    if (o->token && o->position) return cli_fail(CMD, "give --token or --position, not both"), -1;
    long pos = 0;
    if (o->position)
        return parse_index("--position", o->position, (int)c->n_ids, "the prompt has", "token", 0, &pos) ? -1 : pos;
    if (!o->token) return (long)c->n_ids - 1;
    size_t want = strlen(o->token);
    for (size_t i = 0; i < c->n_ids; i++) {
        char buf[32];
        size_t len;
        const char *bytes = gpt2_cli_token(c, c->ids[i], buf, sizeof buf, &len);
        if (len == want && memcmp(bytes, o->token, len) == 0) return (long)i;
    }
    fprintf(stderr, "vkgraph %s: no token of the prompt decodes to \"%s\"; its tokens are:", CMD, o->token);
    for (size_t i = 0; i < c->n_ids; i++) {
        char buf[32], shown[128];
        size_t len;
        const char *bytes = gpt2_cli_token(c, c->ids[i], buf, sizeof buf, &len);
        gpt2_cli_repr(bytes, len, shown, sizeof shown);
        fprintf(stderr, " %s", shown);
    }
    fprintf(stderr, "\n");
    return -1;
}

/* The layer, head and token exist: checked before the device opens.  0, or 1 after an error. */
static int check_choice(const gpt2_cli *c, const attn_options *o, attn_choice *ch) {
    const vkg_model_info *cfg = &c->info;
    if (parse_index("--layer", o->layer, cfg->n_layer, "the model has", "layer", 1, &ch->layer)) return 1;
    ch->head = ALL;
    if (o->head && parse_index("--head", o->head, cfg->n_head, "the model has", "head", 1, &ch->head)) return 1;
    ch->it = chosen_position(c, o);
    return ch->it < 0;
}

static void token_repr(const gpt2_cli *c, long i, char *out, size_t size) {
    char buf[32];
    size_t len;
    const char *bytes = gpt2_cli_token(c, c->ids[i], buf, sizeof buf, &len);
    gpt2_cli_repr(bytes, len, out, size);
}

/* The lesson's table for one layer: for each head, the position in 1..it with the largest
 * weight.  probs: that layer's [H, T, T]. */
static void print_layer_table(const gpt2_cli *c, const float *probs, long layer, long it) {
    const int H = c->info.n_head;
    const size_t T = c->n_ids;
    char buf[32], who[256], whom[256];
    size_t len;
    token_repr(c, it, who, sizeof who);
    printf("layer %ld: %s at position %ld\n", layer, who, it);
    for (int h = 0; h < H; h++) {
        const float *row = probs + ((size_t)h * T + (size_t)it) * T;
        long first = it > 0 ? 1 : 0, best = first; /* the first token alone has only itself */
        for (long j = first + 1; j <= it; j++)
            if (row[j] > row[best]) best = j;
        const char *bytes = gpt2_cli_token(c, c->ids[best], buf, sizeof buf, &len);
        int width = gpt2_cli_repr(bytes, len, whom, sizeof whom);
        printf("head %2d: %s attends most to %s%*s (%.2f)\n", h, who, whom, width < 12 ? 12 - width : 0, "",
               (double)row[best]);
    }
}

/* OUT.png for one layer; OUT-layerI.png for each of every layer (n_layer of them), I padded with
 * zeros to the width of the last index so that the names sort in layer order. */
static void png_path(const char *png, long layer, int every_layer, int n_layer, char *out, size_t size) {
    if (!every_layer) {
        snprintf(out, size, "%s", png);
        return;
    }
    int width = 1;
    for (int last = n_layer - 1; last >= 10; last /= 10) width++;
    size_t stem = strlen(png) - 4; /* cli_check_extension made sure of ".png" */
    snprintf(out, size, "%.*s-layer%0*ld%s", (int)stem, png, width, layer, png + stem);
}

/* One layer's picture: head ch->head's heatmap, or every head as a grid.  probs: [H, T, T]. */
static int write_layer_png(const gpt2_cli *c, const attn_choice *ch, const char *png, const float *probs, long layer,
                           char **labels) {
    const int H = c->info.n_head, T = (int)c->n_ids;
    const char *random = c->info.random_weights ? (ch->head == ALL ? " \xe2\x80\x94 RANDOM WEIGHTS: these patterns mean nothing"
                                                              : " \xe2\x80\x94 RANDOM WEIGHTS: this pattern means nothing")
                                           : "";
    char path[4096], title[256], what[64];
    png_path(png, layer, ch->layer == ALL, c->info.n_layer, path, sizeof path);
    if (ch->head == ALL) snprintf(what, sizeof what, "every head");
    else snprintf(what, sizeof what, "head %ld", ch->head);
    snprintf(title, sizeof title, "%s layer %ld, %s%s", gpt2_cli_model_name(c), layer, what, random);
    vkg_error err = {0};
    vkg_status st;
    if (ch->head == ALL) {
        char(*names)[16] = malloc((size_t)H * sizeof *names);
        const char **panel_titles = malloc((size_t)H * sizeof *panel_titles);
        if (!names || !panel_titles) {
            free(names);
            free(panel_titles);
            return cli_fail(CMD, "out of memory");
        }
        for (int h = 0; h < H; h++) {
            snprintf(names[h], sizeof names[h], "head %d", h);
            panel_titles[h] = names[h];
        }
        st = vkg_heatmap_grid_write_png(path, probs, H, T, (const char *const *)labels, title, panel_titles, &err);
        free(names);
        free(panel_titles);
    } else {
        st = vkg_heatmap_write_png(path, probs + (size_t)ch->head * (size_t)T * (size_t)T, T,
                                   (const char *const *)labels, title, &err);
    }
    if (st != VKG_OK) return cli_fail(CMD, "%s", err.message);
    fprintf(stderr, "vkgraph %s: heatmap of layer %ld, %s%s written to %s\n", CMD, layer, what,
            c->info.random_weights ? " (RANDOM WEIGHTS)" : "", path);
    return 0;
}

/* The prompt's tokens as text, the heatmaps' axis labels (NULL where out of memory). */
static char **token_labels(const gpt2_cli *c) {
    char **labels = calloc(c->n_ids, sizeof *labels);
    for (size_t i = 0; labels && i < c->n_ids; i++) {
        char buf[32];
        size_t len;
        const char *bytes = gpt2_cli_token(c, c->ids[i], buf, sizeof buf, &len);
        if ((labels[i] = malloc(len + 1))) {
            memcpy(labels[i], bytes, len);
            labels[i][len] = '\0';
        }
    }
    return labels;
}

static void free_labels(char **labels, size_t n) {
    for (size_t i = 0; labels && i < n; i++) free(labels[i]);
    free(labels);
}

/* The .npy's shape, [layers,] [heads,] T, T (the axes chosen as "all" kept); returns its rank. */
static int npy_shape(const gpt2_cli *c, const attn_choice *ch, size_t layers, int64_t shape[4]) {
    int nd = 0;
    if (ch->layer == ALL) shape[nd++] = (int64_t)layers;
    if (ch->head == ALL) shape[nd++] = (int64_t)c->info.n_head;
    shape[nd++] = (int64_t)c->n_ids;
    shape[nd++] = (int64_t)c->n_ids;
    return nd;
}

/* One layer's probabilities [H, T, T], as they come: its table, its part of the .npy (the chosen
 * head's square, or every head), its picture. */
static int one_layer(const gpt2_cli *c, const attn_options *o, const attn_choice *ch, const float *probs, long layer,
                     vkg_npy_writer **npy, char **labels) {
    const size_t square = c->n_ids * c->n_ids;
    print_layer_table(c, probs, layer, ch->it);
    fflush(stdout);
    vkg_error err = {0};
    if (*npy) {
        const vkg_status st = ch->head == ALL
                                  ? vkg_npy_writer_append(*npy, probs, (size_t)c->info.n_head * square, &err)
                                  : vkg_npy_writer_append(*npy, probs + (size_t)ch->head * square, square, &err);
        if (st != VKG_OK) {
            *npy = NULL; /* the writer is gone with its file */
            return cli_fail(CMD, "%s", err.message);
        }
    }
    return o->png ? write_layer_png(c, ch, o->png, probs, layer, labels) : 0;
}

/* One pass over the prompt from position 0, without logits (only the layers up to the last one
 * asked for run), then each layer asked for read, shown and written in turn: with --layer all
 * the session holds every layer's probabilities, this process one layer's more. */
static int run(gpt2_cli *c, const attn_options *o, const attn_choice *ch) {
    const vkg_model_info *cfg = &c->info;
    const size_t T = c->n_ids, H = (size_t)cfg->n_head, per_layer = H * T * T;
    const size_t layers = ch->layer == ALL ? (size_t)cfg->n_layer : 1;
    /* checked against the machine before asking for them */
    const double want = (double)(layers + 1) * (double)per_layer * (double)sizeof(float);
    const uint64_t have = vkg_host_memory_bytes();
    if (want > (double)have)
        return cli_fail(CMD, "the attention probabilities of %zu layers x %zu heads x %zu x %zu need %.1f GiB, but this "
                        "machine has %.1f GiB of memory: ask for one --layer, or a shorter prompt", layers, H, T, T,
                        want / 1073741824.0, (double)have / 1073741824.0);
    float *probs = malloc(per_layer * sizeof *probs);
    char **labels = o->png ? token_labels(c) : NULL;
    if (!probs || (o->png && !labels)) {
        free(probs);
        free_labels(labels, T);
        return cli_fail(CMD, "out of memory for %zu heads x %zu x %zu probabilities (%.0f MB)", H, T, T,
                        (double)(per_layer * sizeof *probs) / 1e6);
    }
    vkg_error err = {0};
    int rc = 0;
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.n_ctx = co.n_batch = (int)T;
    co.logits = VKG_LOGITS_NONE;
    co.attention_layer = ch->layer == ALL ? VKG_ALL_LAYERS : (int)ch->layer;
    vkg_context *ctx = NULL;
    vkg_npy_writer *npy = NULL;
    int64_t shape[4];
    const int nd = npy_shape(c, ch, layers, shape);
    if (vkg_context_new(c->model, &co, &ctx, &err) != VKG_OK || vkg_context_prefill(ctx, c->ids, (int)T, &err) != VKG_OK ||
        (o->npy && vkg_npy_writer_open(o->npy, nd, shape, &npy, &err) != VKG_OK))
        rc = cli_fail(CMD, "%s", err.message);
    const long first = ch->layer == ALL ? 0 : ch->layer;
    if (rc == 0) {
        char shown[256], which[64];
        token_repr(c, ch->it, shown, sizeof shown);
        if (ch->layer == ALL) snprintf(which, sizeof which, "every layer");
        else snprintf(which, sizeof which, "layer %ld", ch->layer);
        fprintf(stderr, "vkgraph %s: %s, token %s at position %ld of %zu, on %s\n", CMD, which, shown, ch->it, T,
                vkg_device_name(c->dev));
        if (c->info.random_weights) printf("%s\n", VKG_LESSON_RANDOM_NOTE);
        printf("%d layers; %d heads per layer\n", cfg->n_layer, cfg->n_head);
    }
    for (size_t l = 0; rc == 0 && l < layers; l++) {
        if (vkg_context_get_attention(ctx, (int)(first + (long)l), probs, per_layer, &err) != VKG_OK) {
            rc = cli_fail(CMD, "%s", err.message);
            break;
        }
        if (l) printf("\n");
        rc = one_layer(c, o, ch, probs, first + (long)l, &npy, labels);
    }
    vkg_context_free(ctx);
    free(probs);
    free_labels(labels, T);
    if (npy) {
        /* closed short of its shape (a failure above) it is removed */
        const vkg_status st = vkg_npy_writer_close(npy, &err);
        if (rc == 0 && st != VKG_OK) rc = cli_fail(CMD, "%s", err.message);
        if (rc == 0) {
            fprintf(stderr, "vkgraph %s: probabilities [", CMD);
            for (int d = 0; d < nd; d++) fprintf(stderr, "%s%lld", d ? ", " : "", (long long)shape[d]);
            fprintf(stderr, "] (%s%s%s) written to %s\n", ch->layer == ALL ? "layers, " : "",
                    ch->head == ALL ? "heads, " : "", "query, key", o->npy);
        }
    }
    return rc;
}

int cmd_attention(int argc, char **argv) {
    gpt2_cli c = {.cmd = CMD};
    attn_options o = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        int taken = gpt2_cli_option(&c, argc, argv, &i);
        if (taken == 0) taken = own_option(&o, argc, argv, &i);
        if (taken < 0) return 1;
        if (taken == 0) return cli_unknown_option(CMD, argv[i], usage);
    }
    if (!o.layer) return cli_fail(CMD, "say which layer: --layer L (its index, from 0) or --layer all");
    if (o.png && cli_check_extension(CMD, "--png", o.png, ".png", "PNG")) return 1;
    if (o.npy && cli_check_extension(CMD, "--npy", o.npy, ".npy", "NumPy .npy")) return 1;
    /* The files can be written: checked before the model loads.  Each layer's picture of --layer
     * all differs from the name given only by its suffix, in the same folder. */
    if (o.png && cli_check_output(CMD, "--png", o.png)) return 1;
    if (o.npy && cli_check_output(CMD, "--npy", o.npy)) return 1;
    attn_choice ch;
    int rc = gpt2_cli_load(&c, 0);
    if (rc == 0) rc = check_choice(&c, &o, &ch);
    if (rc == 0) rc = run(&c, &o, &ch);
    gpt2_cli_free(&c);
    return rc;
}
