#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "support/test_util.h"

#include "vkgraph_npy.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double test_nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return num / (den > 1e-30 ? den : 1e-30);
}

/* Debian's NumPy calls the system's libblas.so.3: with libopenblas0-pthread (installed by
 * tools/setup-debian.sh --test) GPT-2 124M at T = 1024 takes seconds, with the reference BLAS
 * minutes. */
float *test_numpy_logits(const char *model_dir, const int32_t *ids, int n, int64_t vocab) {
    return test_numpy_logits_of("VKG_REFERENCE", model_dir, ids, n, vocab);
}

float *test_numpy_logits_of(const char *script_env, const char *model_dir, const int32_t *ids, int n, int64_t vocab) {
    return test_numpy_logits_attention_of(script_env, model_dir, ids, n, vocab, NULL);
}

float *test_numpy_logits_attention_of(const char *script_env, const char *model_dir, const int32_t *ids, int n,
                                      int64_t vocab, const char *attention_npy) {
    const char *script = getenv(script_env);
    if (!script) fail_msg("%s (the NumPy reference script) is not set: run through ctest", script_env);
    size_t len = (size_t)n * 12 + 1;
    char *csv = malloc(len), out[1200];
    assert_non_null(csv);
    size_t used = 0;
    for (int i = 0; i < n; i++) used += (size_t)snprintf(csv + used, len - used, i ? ",%d" : "%d", (int)ids[i]);
    snprintf(out, sizeof out, "%s/reference.npy", model_dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (attention_npy)
            execl("/usr/bin/python3", "python3", script, model_dir, "--ids", csv, "--logits", out, "--attention",
                  attention_npy, (char *)NULL);
        else
            execl("/usr/bin/python3", "python3", script, model_dir, "--ids", csv, "--logits", out, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    free(csv);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        fail_msg("the NumPy reference failed (status %d): /usr/bin/python3 with python3-numpy is needed "
                 "(./tools/setup-debian.sh --test installs it)", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    return test_read_npy_matrix(out, n, vocab);
}

float *test_read_npy_matrix(const char *path, int64_t rows, int64_t cols) {
    float *x = NULL;
    int nd = 0;
    int64_t shape[VKG_NPY_MAX_DIMS];
    vkg_error err = {0};
    if (vkg_npy_read_f32(path, &x, &nd, shape, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(nd, 2);
    assert_int_equal(shape[0], rows);
    assert_int_equal(shape[1], cols);
    return x;
}

double test_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

char *mkdtemp(char *template);

char *test_tmpdir(const char *tag) {
    char buf[256];
    snprintf(buf, sizeof buf, "/tmp/vkg-test-%s-XXXXXX", tag);
    if (!mkdtemp(buf)) return NULL;
    return strdup(buf);
}

int test_remove_tree(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) return unlink(dir) == 0 ? 0 : -1;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path || test_remove_tree(path) != 0)
            rc = -1;
    }
    closedir(d);
    return rmdir(dir) == 0 ? rc : -1;
}

FILE *test_capture_begin(test_capture *c) {
    c->text = NULL;
    c->f = open_memstream(&c->text, &c->len);
    assert_non_null(c->f);
    return c->f;
}

const char *test_capture_end(test_capture *c) {
    fclose(c->f);
    return c->text;
}

const char *test_line_with(const char *text, const char *prefix) {
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, strlen(prefix)) == 0) return p;
    fail_msg("no line starting with '%s' in:\n%s", prefix, text);
    return NULL;
}

const char *test_data_path(const char *rel) {
    static char path[1024];
    const char *data = getenv("VKG_TEST_DATA");
    snprintf(path, sizeof path, "%s/%s", data ? data : "data", rel);
    return path;
}

char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    size_t cap = 1 << 12, used = 0;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    while ((used += fread(buf + used, 1, cap - used, f)) == cap) {
        cap *= 2;
        buf = realloc(buf, cap + 1);
        assert_non_null(buf);
    }
    fclose(f);
    buf[used] = '\0';
    if (len) *len = used;
    return buf;
}

int test_read_ids(const char *dir_rel, int32_t *ids, int cap) {
    char rel[256];
    snprintf(rel, sizeof rel, "%s/ids.txt", dir_rel);
    FILE *f = fopen(test_data_path(rel), "r");
    assert_non_null(f);
    int n = 0, v;
    while (n < cap && fscanf(f, "%d", &v) == 1) {
        ids[n++] = v;
        if (fgetc(f) != ',') break;
    }
    fclose(f);
    return n;
}

int test_expect_logits(const float *got, const float *want, size_t first, size_t rows, size_t V, double nmse_max,
                       float tie, const char *what) {
    double e = test_nmse(got, want, rows * V);
    if (!(e <= nmse_max)) fail_msg("%s: NMSE %.3e against the NumPy reference exceeds %.0e", what, e, nmse_max);
    int ties = 0;
    for (size_t r = 0; r < rows; r++) {
        int32_t a = vkg_argmax(got + r * V, (int)V), b = vkg_argmax(want + r * V, (int)V);
        if (a == b) continue;
        if (fabsf(want[r * V + (size_t)a] - want[r * V + (size_t)b]) > tie)
            fail_msg("%s: row %zu: argmax %d, the reference's %d (logits %g and %g)", what, first + r, (int)a, (int)b,
                     (double)want[r * V + (size_t)a], (double)want[r * V + (size_t)b]);
        ties++;
    }
    fprintf(stderr, "  %-60s NMSE %.2e%s\n", what, e, ties ? " (argmax ties)" : "");
    return ties;
}

vkg_session *test_session_for(vkg_device *dev, vkg_graph *g, vkg_plan **plan) {
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    vkg_device_compile_options(dev, &co);
    vkg_error err = {0};
    *plan = NULL;
    if (vkg_plan_compile(g, &co, plan, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_session *s = NULL;
    if (vkg_session_new(dev, *plan, &s, &err) != VKG_OK) fail_msg("%s", err.message);
    return s;
}

int test_open_model(const char *device, const char *model_rel, vkg_device **dev, vkg_model **model) {
    vkg_device_options o = {.cpu_threads = 2, .quiet = 1, .validation = strcmp(device, "cpu") != 0};
    vkg_error err = {0};
    *dev = NULL;
    *model = NULL;
    if (vkg_device_open(device, &o, dev, &err) != VKG_OK) {
        fprintf(stderr, "cannot open %s: %s\n", device, err.message);
        return -1;
    }
    if (vkg_model_open(test_data_path(model_rel), *dev, NULL, model, &err) != VKG_OK) {
        fprintf(stderr, "%s\n", err.message);
        vkg_device_free(*dev);
        *dev = NULL;
        return -1;
    }
    return 0;
}

int test_close_model(vkg_device *dev, vkg_model *model) {
    vkg_model_free(model);
    const uint64_t messages = vkg_device_validation_errors(dev);
    vkg_device_free(dev);
    if (messages) fprintf(stderr, "%llu validation messages\n", (unsigned long long)messages);
    return messages ? -1 : 0;
}

int test_collect_token(void *user, int32_t id, const char *text, size_t len) {
    (void)text;
    (void)len;
    test_tokens *t = user;
    if (id >= 0 && t->n < (int)(sizeof t->ids / sizeof *t->ids)) t->ids[t->n++] = id;
    return 0;
}

vkg_device *test_open_cpu(void) {
    vkg_device *dev = NULL;
    vkg_error err = {0};
    vkg_device_options co = {.quiet = 1};
    return vkg_device_open("cpu", &co, &dev, &err) == VKG_OK ? dev : NULL;
}
