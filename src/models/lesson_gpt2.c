/* Lesson step 7: look inside GPT-2.  Which earlier token " it" attends to most in each head of
 * layer 4 (model.h[4]), that head 3's whole pattern as a heatmap, and Exercise 6: the heads whose
 * strongest earlier token for " it" moves from " animal" to " street" when "tired" becomes
 * "wide". */
#include "vkgraph_lesson.h"

#include "base/error.h"
#include "vkgraph_heatmap.h"
#include "io/tokenizer.h"
#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/gpt2_random.h"
#include "models/model_handles.h"

#include <stdlib.h>
#include <string.h>

static void sentence_free(vkg_lesson_sentence *s) {
    for (int i = 0; s->tokens && i < s->n_tokens; i++) free(s->tokens[i]);
    free(s->tokens);
    free(s->best);
    free(s->best_weight);
    free(s->heat);
    memset(s, 0, sizeof *s);
}

void vkg_lesson_gpt2_free(vkg_lesson_gpt2 *r) {
    sentence_free(&r->tired);
    sentence_free(&r->wide);
}

/* Tokenizes text and keeps each token's text (what tokenizer.decode([t]) gives). */
static vkg_status tokenize(const vkg_tokenizer *tok, const char *text, int32_t **ids, vkg_lesson_sentence *s,
                           vkg_error *err) {
    size_t n = 0;
    vkg_status st = vkg_tokenizer_encode(tok, text, strlen(text), ids, &n, err);
    if (st != VKG_OK) return st;
    s->text = text;
    s->n_tokens = (int)n;
    s->it = -1;
    if (!(s->tokens = calloc(n ? n : 1, sizeof *s->tokens)))
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the tokens");
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *bytes = vkg_tokenizer_token_bytes(tok, (*ids)[i], &len);
        if (!(s->tokens[i] = malloc(len + 1))) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        memcpy(s->tokens[i], bytes, len);
        s->tokens[i][len] = '\0';
        if (s->it < 0 && strcmp(s->tokens[i], " it") == 0) s->it = (int)i;    /* tokens.index(" it") */
    }
    if (s->it < 1)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "the sentence \"%s\" has no token \" it\" after its first",
                             text);
    return VKG_OK;
}

/* One forward pass with every layer's attention; for each (layer, head) the strongest token in
 * 1..it (the first token ignored) of " it"'s row, and the heatmap of (layer, head). */
static vkg_status look(const vkg_gpt2 *m, vkg_device *dev, const vkg_tokenizer *tok, const char *text, int layer,
                       int head, vkg_lesson_sentence *s, vkg_error *err) {
    int32_t *ids = NULL;
    vkg_status st = tokenize(tok, text, &ids, s, err);
    if (st == VKG_OK) st = vkg_decoder_check_ids(&m->decoder, ids, (size_t)s->n_tokens, err);
    if (st != VKG_OK) {
        free(ids);
        return st;
    }
    const int L = m->config.n_layer, H = m->config.n_head, T = s->n_tokens;
    const size_t per_layer = (size_t)H * (size_t)T * (size_t)T;
    float *probs = malloc((size_t)L * per_layer * sizeof *probs);
    s->best = malloc((size_t)L * (size_t)H * sizeof *s->best);
    s->best_weight = malloc((size_t)L * (size_t)H * sizeof *s->best_weight);
    s->heat = malloc((size_t)T * (size_t)T * sizeof *s->heat);
    if (!probs || !s->best || !s->best_weight || !s->heat) {
        free(ids);
        free(probs);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for %d layers of attention", L);
    }
    st = vkg_decoder_forward(&m->decoder, dev, ids, T, 0, NULL, VKG_ALL_LAYERS, probs, err); /* one pass, no head */
    for (int l = 0; st == VKG_OK && l < L; l++) {
        for (int h = 0; h < H; h++) {
            const float *row = probs + (size_t)l * per_layer + ((size_t)h * (size_t)T + (size_t)s->it) * (size_t)T;
            int best = 1;                       /* weights = layer[head, it, 1:it + 1] */
            for (int j = 2; j <= s->it; j++)
                if (row[j] > row[best]) best = j;
            s->best[l * H + h] = best;
            s->best_weight[l * H + h] = row[best];
        }
        if (l == layer)
            memcpy(s->heat, probs + (size_t)l * per_layer + (size_t)head * (size_t)T * (size_t)T,
                   (size_t)T * (size_t)T * sizeof *probs);
    }
    free(ids);
    free(probs);
    return st;
}

vkg_status vkg_lesson_gpt2_run(vkg_device *dev, const char *model_dir, const char *tokenizer_dir,
                               vkg_lesson_gpt2 *out, vkg_error *err) {
    memset(out, 0, sizeof *out);
    vkg_gpt2 *m = NULL;
    vkg_tokenizer *tok = NULL;
    vkg_gpt2_load_options lo;
    vkg_gpt2_load_options_default(&lo);
    lo.transposed = vkg_device_prefers_transposed_weights(dev);
    /* The lesson's step reads GPT-2's own modules (c_attn, the learned positions): another
     * architecture is refused by name rather than by a missing GPT-2 key. */
    int llama = 0;
    vkg_status st = vkg_model_choose_loader(model_dir, &llama, err);
    if (st == VKG_OK && llama)
        st = vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s is a Llama-family model; this step looks inside GPT-2 (give "
                           "a GPT-2 folder; vkgraph attention -m DIR shows any model's attention)", model_dir);
    if (st == VKG_OK) st = vkg_gpt2_load_with(model_dir, &lo, &m, err);
    if (st == VKG_OK && vkg_tokenizer_load(tokenizer_dir ? tokenizer_dir : model_dir, &tok, err) != VKG_OK) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err ? err->message : "");
        st = vkg_error_set(err, VKG_ERR_IO, "%s (a tokenizer folder can be named with --tokenizer, e.g. "
                           "data/gpt2-tokenizer in the source tree)", why);
    }
    if (st == VKG_OK && vkg_tokenizer_vocab_size(tok) > m->config.vocab_size)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "the tokenizer has %d tokens but the model in %s only %d",
                           (int)vkg_tokenizer_vocab_size(tok), model_dir, m->config.vocab_size);
    if (st == VKG_OK) {
        out->random_weights = vkg_gpt2_dir_is_random(model_dir);
        out->n_layer = m->config.n_layer;
        out->n_head = m->config.n_head;
        /* the lesson's layer index 4, head 3; smaller models use their last layer / head */
        out->layer = out->n_layer > VKG_LESSON_GPT2_LAYER ? VKG_LESSON_GPT2_LAYER : out->n_layer - 1;
        out->head = out->n_head > VKG_LESSON_GPT2_HEAD ? VKG_LESSON_GPT2_HEAD : out->n_head - 1;
        st = look(m, dev, tok, VKG_LESSON_SENTENCE_TIRED, out->layer, out->head, &out->tired, err);
    }
    if (st == VKG_OK) st = look(m, dev, tok, VKG_LESSON_SENTENCE_WIDE, out->layer, out->head, &out->wide, err);
    vkg_tokenizer_free(tok);
    vkg_gpt2_free(m);
    if (st != VKG_OK) vkg_lesson_gpt2_free(out);
    return st;
}

int vkg_lesson_gpt2_moves(const vkg_lesson_gpt2 *r, int *layers, int *heads, int max) {
    int n = 0;
    for (int l = 0; l < r->n_layer; l++)
        for (int h = 0; h < r->n_head; h++) {
            const char *before = r->tired.tokens[r->tired.best[l * r->n_head + h]];
            const char *after = r->wide.tokens[r->wide.best[l * r->n_head + h]];
            if (strcmp(before, " animal") != 0 || strcmp(after, " street") != 0) continue;
            if (n < max) {
                layers[n] = l;
                heads[n] = h;
            }
            n++;
        }
    return n;
}

/* ---- printing ----------------------------------------------------------------------------- */

/* Python's repr() of a str: single quotes unless the text holds ' and no ", escapes for \ and
 * control characters, bytes that are not UTF-8 as U+FFFD (as decode() makes them).  Returns
 * the number of characters (code points) written, for padding. */
int vkg_lesson_py_repr(char *buf, size_t size, const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    char quote = strchr(text, '\'') && !strchr(text, '"') ? '"' : '\'';
    size_t used = 0;
    int chars = 0;
#define PUT(str, w)                                                                                   \
    do {                                                                                              \
        size_t l_ = strlen(str);                                                                      \
        if (used + l_ < size) memcpy(buf + used, str, l_), used += l_;                                \
        chars += (w);                                                                                 \
    } while (0)
    char q[2] = {quote, '\0'};
    PUT(q, 1);
    while (*s) {
        char one[8] = {0};
        int n = *s < 0x80 ? 1 : (*s >> 5) == 6 ? 2 : (*s >> 4) == 14 ? 3 : (*s >> 3) == 30 ? 4 : 0;
        int valid = n > 0;
        for (int i = 1; valid && i < n; i++) valid = (s[i] & 0xC0) == 0x80;
        if (!valid) {
            PUT("\xEF\xBF\xBD", 1);
            s++;
            continue;
        }
        if (n > 1) {
            memcpy(one, s, (size_t)n);
            PUT(one, 1);
        } else if (*s == '\\' || *s == (unsigned char)quote) {
            one[0] = '\\';
            one[1] = (char)*s;
            PUT(one, 2);
        } else if (*s == '\n' || *s == '\r' || *s == '\t') {
            snprintf(one, sizeof one, "\\%c", *s == '\n' ? 'n' : *s == '\r' ? 'r' : 't');
            PUT(one, 2);
        } else if (*s < 0x20 || *s == 0x7f) {
            snprintf(one, sizeof one, "\\x%02x", *s);
            PUT(one, 4);
        } else {
            one[0] = (char)*s;
            PUT(one, 1);
        }
        s += n;
    }
    PUT(q, 1);
#undef PUT
    buf[used < size ? used : size - 1] = '\0';
    return chars;
}

static void print_choice(FILE *f, const vkg_lesson_sentence *s, int index, int width) {
    char repr[128];
    int chars = vkg_lesson_py_repr(repr, sizeof repr, s->tokens[index]);
    fprintf(f, "%s%*s", repr, chars < width ? width - chars : 0, "");
}

void vkg_lesson_print_gpt2(FILE *f, const vkg_lesson_gpt2 *r) {
    const vkg_lesson_sentence *s = &r->tired;
    if (r->random_weights) fprintf(f, "%s\n", VKG_LESSON_RANDOM_NOTE);
    fprintf(f, "%d layers; %d heads per layer\n", r->n_layer, r->n_head);
    fprintf(f, "\"%s\", layer %d:\n", s->text, r->layer);
    for (int h = 0; h < r->n_head; h++) {        /* f"{tokens[best]!r:12} ({weights.max():.2f})" */
        fprintf(f, "head %2d: ' it' attends most to ", h);
        print_choice(f, s, s->best[r->layer * r->n_head + h], 12);
        fprintf(f, " (%.2f)\n", (double)s->best_weight[r->layer * r->n_head + h]);
    }
    fprintf(f, "Exercise 6: \"%s\": heads whose strongest earlier token for ' it' moves from ' animal' to "
               "' street':\n", r->wide.text);
    int layers[64], heads[64];
    int n = vkg_lesson_gpt2_moves(r, layers, heads, 64);
    for (int i = 0; i < n && i < 64; i++) {
        int k = layers[i] * r->n_head + heads[i];
        fprintf(f, "  layer %2d, head %2d: ' animal' (%.2f) -> ' street' (%.2f)\n", layers[i], heads[i],
                (double)r->tired.best_weight[k], (double)r->wide.best_weight[k]);
    }
    if (n == 0) fprintf(f, "  none\n");
    else fprintf(f, "%d of %d heads\n", n, r->n_layer * r->n_head);
}

vkg_status vkg_lesson_gpt2_heatmap(const vkg_lesson_gpt2 *r, const char *path, vkg_error *err) {
    char title[128];
    snprintf(title, sizeof title, "GPT-2 layer %d, head %d%s", r->layer, r->head,
             r->random_weights ? " \xe2\x80\x94 RANDOM WEIGHTS: this pattern means nothing" : "");
    return vkg_heatmap_write_png(path, r->tired.heat, r->tired.n_tokens, (const char *const *)r->tired.tokens, title,
                                 err);
}

vkg_status vkg_lesson_step_gpt2(vkg_device *dev, const char *model_dir, const char *tokenizer_dir,
                                const char *png_path, FILE *f, vkg_error *err) {
    vkg_lesson_gpt2 r;
    vkg_status st = vkg_lesson_gpt2_run(dev, model_dir, tokenizer_dir, &r, err);
    if (st != VKG_OK) return st;
    vkg_lesson_print_gpt2(f, &r);
    char named[64];
    if (png_path && !png_path[0]) { /* the default: named for what it shows */
        snprintf(named, sizeof named, VKG_LESSON_HEATMAP_PATTERN, r.layer, r.head);
        png_path = named;
    }
    if (png_path) {
        st = vkg_lesson_gpt2_heatmap(&r, png_path, err);
        if (st == VKG_OK)
            fprintf(f, "heatmap of layer %d, head %d%s: %s\n", r.layer, r.head,
                    r.random_weights ? " (RANDOM WEIGHTS)" : "", png_path);
    }
    vkg_lesson_gpt2_free(&r);
    return st;
}
