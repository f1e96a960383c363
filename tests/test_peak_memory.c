/* Peak resident memory of a GPT-2 forward pass on each executor: no more than the weights, the
 * arena and 64 MiB.  On a device whose memory is the host's (lavapipe) the weights must not be
 * held twice, once by the loader and once as device memory: they are imported where they lie
 * (vulkan/host_import.c).  The model (2 layers of GPT-2 124M's width and its vocabulary: 211 MB of
 * weights) is large enough that a second copy breaks the bound.
 *
 * Each executor runs in a child process of its own, so that each has its own peak (VmHWM).  The
 * peak is counted from the resident size once the device is open: a Vulkan driver's own code and
 * data (lavapipe maps some 60 MB of LLVM) belong to the device, not to the model.  Under the
 * sanitizers the bound is not checked (their shadow memory and quarantine are not the program's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/gpt2_random.h"
#include "support/test_util.h"
#include "support/vk_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#define SLACK_BYTES (64ull << 20)

static char tmp_dir[4096], model_dir[4096];

/* A field of /proc/self/status in bytes (its "kB" values), or 0 when it cannot be read. */
static uint64_t status_bytes(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') kb = strtoull(line + n + 1, NULL, 10);
    fclose(f);
    return (uint64_t)kb * 1024u;
}

/* The child's whole job: 0 when the forward pass ran within the bound, 1 otherwise. */
static int measure(const char *device) {
    vkg_error err = {0};
    vkg_device *dev = NULL;
    if (strcmp(device, "cpu") == 0) {
        vkg_device_options opts = {.cpu_threads = 2, .quiet = 1};
        if (vkg_device_open("cpu", &opts, &dev, &err) != VKG_OK) return fprintf(stderr, "%s\n", err.message), 1;
    } else {
        dev = vk_test_open();
    }
    uint64_t base = status_bytes("VmRSS");
    vkg_gpt2 *m = NULL;
    if (vkg_gpt2_load(model_dir, &m, &err) != VKG_OK) return fprintf(stderr, "%s\n", err.message), 1;
    enum { T = 16 };
    int32_t ids[T];
    for (int i = 0; i < T; i++) ids[i] = (int32_t)(i * 3001 % 50257);
    vkg_forward_options o;
    vkg_forward_options_default(&o, T);
    vkg_runner r;
    static float logits[50257];
    if (vkg_runner_new(&m->decoder, dev, &o, &r, &err) != VKG_OK || vkg_runner_run(&r, ids, 0, &err) != VKG_OK ||
        vkg_runner_logits(&r, logits, 50257, &err) != VKG_OK)
        return fprintf(stderr, "%s: %s\n", device, err.message), 1;
    vkg_memory_stats stats;
    vkg_plan_memory(r.plan, &stats);
    uint64_t peak = status_bytes("VmHWM");
    vkg_runner_free(&r);
    vkg_gpt2_free(m);
    uint64_t messages = dev && strcmp(device, "cpu") != 0 ? vkg_device_validation_errors(dev) : 0;
    vkg_device_free(dev);
    uint64_t bound = stats.constant_bytes + stats.arena_bytes + SLACK_BYTES;
    printf("%s: peak %.1f MiB above the %.1f MiB of the open device; weights %.1f MiB + arena %.1f MiB + 64 MiB "
           "= %.1f MiB%s\n", device, (double)(peak - base) / 1048576.0, (double)base / 1048576.0,
           (double)stats.constant_bytes / 1048576.0, (double)stats.arena_bytes / 1048576.0,
           (double)bound / 1048576.0, SANITIZED ? " (not checked under the sanitizers)" : "");
    if (messages) return fprintf(stderr, "%llu validation messages\n", (unsigned long long)messages), 1;
    if (!base || !peak) return fprintf(stderr, "cannot read /proc/self/status\n"), 1;
    return !SANITIZED && peak - base > bound;
}

static void run_child(const char *device) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int rc = measure(device);
        fflush(NULL);
        _exit(rc);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_cpu_peak(void **state) {
    (void)state;
    run_child("cpu");
}

static void test_vulkan_peak(void **state) {
    (void)state;
    run_child("vulkan");
}

static int write_model(void **state) {
    (void)state;
    char *dir = test_tmpdir("peak-memory");
    if (!dir) return -1;
    snprintf(tmp_dir, sizeof tmp_dir, "%s", dir);
    snprintf(model_dir, sizeof model_dir, "%s/model", dir);
    free(dir);
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    o.config.n_layer = 2, o.config.n_head = 12, o.config.n_embd = 768, o.config.n_positions = 128;
    o.config.vocab_size = 50257, o.config.bos_token_id = o.config.eos_token_id = 50256;
    vkg_error err = {0};
    if (vkg_gpt2_write_random(model_dir, &o, &err) != VKG_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    return 0;
}

static int remove_model(void **state) {
    (void)state;
    return test_remove_tree(tmp_dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_peak),
        cmocka_unit_test(test_vulkan_peak),
    };
    return cmocka_run_group_tests(tests, write_model, remove_model);
}
