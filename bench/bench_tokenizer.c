/* bench_tokenizer DIR [FILE...]: encoding speed of the tokenizer in DIR on one core, in MB/s of
 * UTF-8 text, best of 3 runs.  The text is the FILEs given, concatenated, or else about 8 MB
 * made here: English-like words drawn from a Zipf distribution over a vocabulary of made-up
 * words (so the word cache sees what real text gives it, not one paragraph repeated), with
 * capitals, numbers, punctuation, line breaks, code-like runs of spaces and some CJK. */
#include "vkgraph.h"
#include "vkgraph_model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static void put(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = realloc(*buf, *cap);
        if (!*buf) exit(1);
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
}

static char *make_text(size_t want, size_t *len) {
    enum { WORDS = 20000 };
    static const char *const syl[] = {"the", "an", "re", "con", "ing", "ed", "tion", "al", "er", "in", "st",
                                      "pro", "ex", "com", "ment", "ly", "ous", "ver", "per", "sa", "mo", "ti"};
    static const char *const cjk[] = {"\xe6\x97\xa5\xe6\x9c\xac", "\xe4\xbd\xa0\xe5\xa5\xbd", "\xe4\xb8\x96\xe7\x95\x8c",
                                      "\xe6\x9d\xb1\xe4\xba\xac"};
    char (*words)[32] = malloc(WORDS * sizeof *words);
    double *cdf = malloc(WORDS * sizeof *cdf), total = 0;
    for (int w = 0; w < WORDS; w++) {
        words[w][0] = '\0';
        int n = 1 + (int)(next_u32() % 4);
        for (int k = 0; k < n; k++) strcat(words[w], syl[next_u32() % (sizeof syl / sizeof syl[0])]);
        total += 1.0 / (w + 1);
        cdf[w] = total;
    }
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    while (*len < want) {
        double u = (next_u32() / 2097152.0) * total; /* next_u32 gives 21 bits after the shift */
        int lo = 0, hi = WORDS - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cdf[mid] < u) lo = mid + 1;
            else hi = mid;
        }
        uint32_t r = next_u32() % 1000;
        char word[48];
        snprintf(word, sizeof word, "%s", words[lo]);
        if (r < 80) word[0] = (char)(word[0] - 32); /* Capitalized */
        put(&buf, len, &cap, " ", 1);
        if (r < 20) {
            char num[16];
            int n = snprintf(num, sizeof num, "%u", next_u32() % 100000);
            put(&buf, len, &cap, num, (size_t)n);
        } else if (r < 25) {
            const char *c = cjk[next_u32() % 4];
            put(&buf, len, &cap, c, strlen(c));
        } else {
            put(&buf, len, &cap, word, strlen(word));
        }
        if (r >= 900 && r < 960) put(&buf, len, &cap, ",", 1);
        else if (r >= 960 && r < 990) put(&buf, len, &cap, ".", 1);
        else if (r >= 990 && r < 996) put(&buf, len, &cap, "\n\n", 2);
        else if (r >= 996) put(&buf, len, &cap, "\n    ", 5);
    }
    free(words);
    free(cdf);
    return buf;
}

static char *read_files(int n, char **paths, size_t *len) {
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f) {
            fprintf(stderr, "bench_tokenizer: cannot open %s\n", paths[i]);
            exit(1);
        }
        char chunk[65536];
        size_t got;
        while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) put(&buf, len, &cap, chunk, got);
        fclose(f);
    }
    return buf;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout, "usage: bench_tokenizer TOKENIZER_DIR [TEXT_FILE...]\n");
        return argc < 2;
    }
    vkg_error err = {0};
    vkg_tokenizer *t = NULL;
    double t0 = now();
    if (vkg_tokenizer_load(argv[1], &t, &err) != VKG_OK) {
        fprintf(stderr, "bench_tokenizer: %s\n", err.message);
        return 1;
    }
    double load_s = now() - t0;
    size_t len = 0;
    char *text = argc > 2 ? read_files(argc - 2, argv + 2, &len) : make_text(8u << 20, &len);
    double best = INFINITY;
    size_t n = 0;
    for (int run = 0; run < 3; run++) {
        int32_t *ids = NULL;
        t0 = now();
        if (vkg_tokenizer_encode(t, text, len, &ids, &n, &err) != VKG_OK) {
            fprintf(stderr, "bench_tokenizer: %s\n", err.message);
            return 1;
        }
        double s = now() - t0;
        if (s < best) best = s;
        free(ids);
    }
    printf("%s: loaded in %.2f s; encoded %.2f MB (%s) into %zu tokens in %.3f s: %.1f MB/s, %.2f M tokens/s "
           "(one thread, best of 3)\n",
           argv[1], load_s, len / 1e6, argc > 2 ? "the files given" : "made-up text", n, best, len / 1e6 / best,
           n / 1e6 / best);
    free(text);
    vkg_tokenizer_free(t);
    return 0;
}
