/* What the GPT-2 command tests share: a scratch folder, the tiny golden model, and running
 * `vkgraph` (or any program) with its output captured.  Each test file that includes it gets its
 * own copy (the helpers are static). */
#ifndef VKG_TEST_GPT2_CLI_RUN_H
#define VKG_TEST_GPT2_CLI_RUN_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/test_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char *tmp;
static char data_dir[1024], tiny[1100], ids_csv[256];
static const char *bin;

static inline int setup(void **state) {
    (void)state;
    const char *d = getenv("VKG_TEST_DATA");
    snprintf(data_dir, sizeof data_dir, "%s", d ? d : "data");
    snprintf(tiny, sizeof tiny, "%s/gpt2-tiny", data_dir);
    char p[1200];
    snprintf(p, sizeof p, "%s/ids.txt", tiny);
    FILE *f = fopen(p, "r");
    if (!f || !fgets(ids_csv, sizeof ids_csv, f)) return -1;
    fclose(f);
    ids_csv[strcspn(ids_csv, "\n")] = '\0';
    bin = getenv("VKG_BINARY");
    tmp = test_tmpdir("gpt2cli");
    if (!tmp) return -1;
    return 0;
}

static inline int teardown(void **state) {
    (void)state;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    int rc = system(cmd);
    free(tmp);
    return rc == 0 ? 0 : -1;
}

static inline const char *in_tmp(const char *name) {
    static char p[4][1200];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmp, name);
    return p[k];
}

typedef struct result { int status; char *out, *err; double seconds; } result;

static inline void result_free(result *r) {
    free(r->out);
    free(r->err);
}

/* Runs argv (NULL-terminated) with stdout and stderr captured; env: "NAME=VALUE" or NULL. */
static inline result run(const char *const *argv, const char *env) {
    char out_path[1200], err_path[1200];
    snprintf(out_path, sizeof out_path, "%s/out.txt", tmp);
    snprintf(err_path, sizeof err_path, "%s/err.txt", tmp);
    fflush(NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(126);
        if (env) {
            char name[64];
            size_t eq = strcspn(env, "=");
            snprintf(name, sizeof name, "%.*s", (int)eq, env);
            setenv(name, env + eq + 1, 1);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    result r = {WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, test_read_file(out_path, NULL), test_read_file(err_path, NULL),
                (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)};
    return r;
}

/* Runs argv with standard input read from the file `input`. */
static inline result run_with_input(const char *const *argv, const char *input, const char *env) {
    int saved = dup(0), in = open(input, O_RDONLY);
    assert_true(saved >= 0 && in >= 0);
    assert_true(dup2(in, 0) == 0); /* the child inherits it */
    close(in);
    result r = run(argv, env);
    assert_true(dup2(saved, 0) == 0);
    close(saved);
    return r;
}

/* vkgraph ARGS... ; the command's exit status must be `status`; for errors, stderr must start with
 * "vkgraph CMD: " and hold `part`. */
#define VKG(...) run((const char *const[]){bin, __VA_ARGS__, NULL}, NULL)

static inline void expect_fail(result r, const char *cmd, const char *part) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "vkgraph %s: ", cmd);
    if (r.status != 1) fail_msg("%s: exit %d (expected 1), stderr: %s", cmd, r.status, r.err);
    if (strncmp(r.err, prefix, strlen(prefix)) != 0) fail_msg("stderr does not start with \"%s\": %s", prefix, r.err);
    if (part && !strstr(r.err, part)) fail_msg("stderr lacks \"%s\": %s", part, r.err);
    result_free(&r);
}

static inline void expect_ok(result *r, const char *what) {
    if (r->status != 0) fail_msg("%s: exit %d, stderr: %s", what, r->status, r->err);
}

static inline void need_binary(void) {
    if (!bin) skip();
    if (access(bin, X_OK) != 0) fail_msg("VKG_BINARY=%s is not an executable: build the vkgraph target", bin);
}

#endif
