/* The helpers of fuzz.h: a private folder for the files targets write, and splitting inputs. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fuzz_fail(const char *file, int line, const char *what) {
    fprintf(stderr, "%s:%d: invariant failed: %s\n", file, line, what);
    abort();
}

static char dir[256];
static char names[16][64];
static int n_names;

static void remove_dir(void) {
    char path[sizeof dir + sizeof names[0] + 2];
    for (int i = 0; i < n_names; i++) {
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) < (int)sizeof path) unlink(path);
    }
    rmdir(dir);
}

const char *fuzz_dir(void) {
    if (dir[0]) return dir;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/') tmp = "/tmp";
    snprintf(dir, sizeof dir, "%s/vkg-fuzz-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(remove_dir);
    return dir;
}

static int name_slot(const char *name) {
    for (int i = 0; i < n_names; i++)
        if (strcmp(names[i], name) == 0) return i;
    if (n_names == 16 || strlen(name) >= sizeof names[0]) abort();
    strcpy(names[n_names], name);
    return n_names++;
}

const char *fuzz_write_file(const char *name, const void *data, size_t size) {
    static char paths[16][sizeof dir + sizeof names[0] + 2];
    int slot = name_slot(name);
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(paths[slot], "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(paths[slot]);
        abort();
    }
    return paths[slot];
}

void fuzz_remove_file(const char *name) {
    char path[sizeof dir + sizeof names[0] + 2];
    name_slot(name);
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    unlink(path);
}

void fuzz_split(const uint8_t *data, size_t size, const uint8_t **a, size_t *a_len, const uint8_t **b,
                size_t *b_len) {
    const size_t sep = sizeof FUZZ_SEPARATOR - 1;
    *a = data;
    *a_len = size;
    *b = data + size;
    *b_len = 0;
    for (size_t i = 0; i + sep <= size; i++)
        if (memcmp(data + i, FUZZ_SEPARATOR, sep) == 0) {
            *a_len = i;
            *b = data + i + sep;
            *b_len = size - i - sep;
            return;
        }
}
