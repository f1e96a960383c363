/* `vkgraph attention`: which earlier token each head of a layer attends to most, printed as the
 * attention lesson prints it, and one head's whole pattern as a heatmap. */
#include "cli.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "io/heatmap.h"
#include "io/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "attention"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph attention -m DIR (-p TEXT | -f FILE | --ids IDS) --layer L [--head H]\n"
            "                         [--token TEXT | --position I] [--png OUT.png] [--npy OUT.npy] [--device D]\n"
            "\n"
            "Runs GPT-2 over the prompt and prints, for one token and every head of layer L, the earlier\n"
            "token it attends to most (the first token left out, as it soaks up attention) and the weight:\n"
            "\n"
            "    12 layers; 12 heads per layer\n"
            "    head  3: ' it' attends most to ' animal'    (0.85)\n"
            "\n"
            "Layers and heads are numbered from 0.\n"
            "\n");
    gpt2_cli_usage_common(f);
    fprintf(f,
            "  --layer L           the layer (required)\n"
            "  --head H            the head drawn with --png (default 0)\n"
            "  --token TEXT        the first token that decodes to TEXT, e.g. \" it\" (default: the last token)\n"
            "  --position I        the token at position I, from 0\n"
            "  --png FILE          a heatmap of head H's attention over the whole prompt\n"
            "  --npy FILE          layer L's probabilities, [heads, T, T] float32\n"
            "  -h, --help          show this help\n");
}

typedef struct attn_options {
    long layer, head, position;
    int layer_given, head_given, position_given;
    const char *token, *png, *npy;
} attn_options;

static int own_option(attn_options *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char **text = NULL;
    long *num = NULL;
    int *given = NULL;
    if (strcmp(a, "--layer") == 0) num = &o->layer, given = &o->layer_given;
    else if (strcmp(a, "--head") == 0) num = &o->head, given = &o->head_given;
    else if (strcmp(a, "--position") == 0) num = &o->position, given = &o->position_given;
    else if (strcmp(a, "--token") == 0) text = &o->token;
    else if (strcmp(a, "--png") == 0) text = &o->png;
    else if (strcmp(a, "--npy") == 0) text = &o->npy;
    else return 0;
    const char *val = cli_value(CMD, argc, argv, i);
    if (!val) return -1;
    if (text) {
        if (*text) return cli_fail(CMD, "%s given twice", a), -1;
        *text = val;
        return 1;
    }
    if (*given) return cli_fail(CMD, "%s given twice", a), -1;
    *given = 1;
    return cli_int(CMD, a, val, 0, 1L << 30, num) ? -1 : 1;
}

/* The position --token or --position names (default: the last).  -1 after printing an error. */
static long chosen_position(const gpt2_cli *c, const attn_options *o) {
    if (o->token && o->position_given) return cli_fail(CMD, "give --token or --position, not both"), -1;
    if (o->position_given) {
        if (o->position >= (long)c->n_ids)
            return cli_fail(CMD, "--position %ld: the prompt has %zu tokens (positions 0 to %zu)", o->position,
                            c->n_ids, c->n_ids - 1), -1;
        return o->position;
    }
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

/* The lesson's table: for each head, the position in 1..it with the largest weight. */
static void print_table(const gpt2_cli *c, const float *probs, long it) {
    const int H = c->model->config.n_head;
    const size_t T = c->n_ids;
    char buf[32], who[256], whom[256];
    size_t len;
    const char *bytes = gpt2_cli_token(c, c->ids[it], buf, sizeof buf, &len);
    gpt2_cli_repr(bytes, len, who, sizeof who);
    printf("%d layers; %d heads per layer\n", c->model->config.n_layer, H);
    for (int h = 0; h < H; h++) {
        const float *row = probs + ((size_t)h * T + (size_t)it) * T;
        long first = it > 0 ? 1 : 0, best = first; /* the first token alone has only itself */
        for (long j = first + 1; j <= it; j++)
            if (row[j] > row[best]) best = j;
        bytes = gpt2_cli_token(c, c->ids[best], buf, sizeof buf, &len);
        int width = gpt2_cli_repr(bytes, len, whom, sizeof whom);
        printf("head %2d: %s attends most to %s%*s (%.2f)\n", h, who, whom, width < 12 ? 12 - width : 0, "",
               (double)row[best]);
    }
}

static int write_png(const gpt2_cli *c, const attn_options *o, const float *probs) {
    const size_t T = c->n_ids;
    char **labels = calloc(T, sizeof *labels);
    if (!labels) return cli_fail(CMD, "out of memory");
    for (size_t i = 0; i < T; i++) {
        char buf[32];
        size_t len;
        const char *bytes = gpt2_cli_token(c, c->ids[i], buf, sizeof buf, &len);
        if ((labels[i] = malloc(len + 1))) {
            memcpy(labels[i], bytes, len);
            labels[i][len] = '\0';
        }
    }
    char title[128];
    snprintf(title, sizeof title, "GPT-2 layer %ld, head %ld (from 0)%s", o->layer, o->head,
             c->random_weights ? ", RANDOM weights" : "");
    vkg_error err = {0};
    int rc = 0;
    if (vkg_heatmap_write_png(o->png, probs + (size_t)o->head * T * T, (int)T, (const char *const *)labels, title,
                              &err) != VKG_OK)
        rc = cli_fail(CMD, "%s", err.message);
    for (size_t i = 0; i < T; i++) free(labels[i]);
    free(labels);
    if (rc == 0) fprintf(stderr, "vkgraph %s: heatmap of layer %ld, head %ld written to %s\n", CMD, o->layer, o->head, o->png);
    return rc;
}

/* The layer, head and token exist: checked before the device opens.  -1 after an error, else
 * the chosen position. */
static long check_choice(const gpt2_cli *c, const attn_options *o) {
    const vkg_gpt2_config *cfg = &c->model->config;
    if (o->layer >= cfg->n_layer)
        return cli_fail(CMD, "--layer %ld: the model has layers 0 to %d", o->layer, cfg->n_layer - 1), -1;
    if (o->head >= cfg->n_head) return cli_fail(CMD, "--head %ld: the model has heads 0 to %d", o->head, cfg->n_head - 1), -1;
    return chosen_position(c, o);
}

static int run(gpt2_cli *c, const attn_options *o, long it) {
    const vkg_gpt2_config *cfg = &c->model->config;
    const size_t T = c->n_ids, H = (size_t)cfg->n_head;
    float *probs = malloc(H * T * T * sizeof *probs);
    int rc = probs ? 0 : cli_fail(CMD, "out of memory");
    vkg_error err = {0};
    /* Without logits only layers 0..L run. */
    if (rc == 0 && vkg_gpt2_forward(c->model, c->dev, c->ids, (int)T, 0, NULL, (int)o->layer, probs, &err) != VKG_OK)
        rc = cli_fail(CMD, "%s", err.message);
    if (rc == 0) {
        char buf[32], shown[256];
        size_t len;
        const char *bytes = gpt2_cli_token(c, c->ids[it], buf, sizeof buf, &len);
        gpt2_cli_repr(bytes, len, shown, sizeof shown);
        fprintf(stderr, "vkgraph %s: layer %ld, token %s at position %ld of %zu, on %s\n", CMD, o->layer, shown, it, T,
                vkg_device_name(c->dev));
        print_table(c, probs, it);
        fflush(stdout);
    }
    if (rc == 0 && o->npy) {
        const int64_t shape[3] = {(int64_t)H, (int64_t)T, (int64_t)T};
        if (vkg_npy_write_f32(o->npy, probs, 3, shape, &err) != VKG_OK) rc = cli_fail(CMD, "%s", err.message);
        else fprintf(stderr, "vkgraph %s: layer %ld's probabilities [%zu, %zu, %zu] written to %s\n", CMD, o->layer, H,
                     T, T, o->npy);
    }
    if (rc == 0 && o->png) rc = write_png(c, o, probs);
    free(probs);
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
    if (!o.layer_given) return cli_fail(CMD, "say which layer: --layer L (from 0)");
    int rc = gpt2_cli_load(&c, 0);
    long it = rc == 0 ? check_choice(&c, &o) : -1;
    if (it < 0) rc = 1;
    if (rc == 0) rc = gpt2_cli_open_device(&c);
    if (rc == 0) rc = run(&c, &o, it);
    gpt2_cli_free(&c);
    return rc;
}
