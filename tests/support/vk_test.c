/* Vulkan test helpers: see vk_test.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/vk_test.h"
#include "support/test_util.h"

#include "base/error.h"
#include "vkgraph.h"

int vk_test_allow_no_vulkan(void) {
    const char *v = getenv("VKG_TEST_ALLOW_NO_VULKAN");
    return v && *v && strcmp(v, "0") != 0;
}

/* What is printed where no Vulkan device opens; skipping says so, failing says how to skip. */
static void report_no_vulkan(const char *why) {
    if (vk_test_allow_no_vulkan())
        fprintf(stderr, "no Vulkan device (%s): skipping, since VKG_TEST_ALLOW_NO_VULKAN is set\n", why);
    else
        fprintf(stderr, "no Vulkan device (%s): the Vulkan tests fail without one (on a machine "
                        "without Vulkan, set VKG_TEST_ALLOW_NO_VULKAN=1 to skip them)\n", why);
}

void vk_test_no_vulkan(const char *why) {
    if (vk_test_allow_no_vulkan()) {
        report_no_vulkan(why);
        skip();
    }
    fail_msg("no Vulkan device (%s); set VKG_TEST_ALLOW_NO_VULKAN=1 to skip the Vulkan tests", why);
}

/* The best Vulkan device with validation on: VKG_OK, VKG_ERR_NO_DEVICE (*d NULL), or another
 * status when it opened without an active layer or not at all (*d NULL). */
static vkg_status open_validated(vkg_device **d, vkg_device_options opts, vkg_error *err) {
    opts.validation = 1;
    opts.quiet = 1;
    *d = NULL;
    vkg_status st = vkg_device_open("vulkan", &opts, d, err);
    if (st == VKG_OK && !vk_test_context(*d)->validation) {
        vkg_device_free(*d);
        *d = NULL;
        st = vkg_error_set(err, VKG_ERR_DEVICE, "the validation layer is not active");
    }
    return st;
}

/* Frees d, Vulkan side first so that messages from vkDestroyDevice and vkDestroyInstance still
 * land in its counter, and returns how many validation messages it counted. */
static uint64_t close_counting(vkg_device *d) {
    d->ops->device_free(d->impl);
    d->impl = NULL;
    uint64_t messages = vkg_device_validation_errors(d);
    vkg_device_free(d);
    return messages;
}

vkg_device *vk_test_open(void) { return vk_test_open_with((vkg_device_options){0}); }

vkg_device *vk_test_open_with(vkg_device_options opts) {
    vkg_device *d = NULL;
    vkg_error err = {0};
    vkg_status st = open_validated(&d, opts, &err);
    if (st == VKG_ERR_NO_DEVICE) vk_test_no_vulkan(err.message);
    if (st != VKG_OK) fail_msg("opening the Vulkan device with validation: %s", err.message);
    return d;
}

vkg_vk_context *vk_test_context(vkg_device *d) { return (vkg_vk_context *)d->impl; }

void vk_test_close(vkg_device *d) {
    uint64_t messages = close_counting(d);
    if (messages) fail_msg("%llu validation messages (printed above), teardown included", (unsigned long long)messages);
}

vkg_device *vk_test_open_named(const char *device) {
    vkg_device *d = strcmp(device, "cpu") ? vk_test_open() : test_open_cpu();
    assert_non_null(d);
    return d;
}

void vk_test_close_any(vkg_device *d) {
    if (vkg_device_is_cpu(d)) vkg_device_free(d);
    else vk_test_close(d);
}

int vk_test_group_setup(void **state) {
    vkg_device *d = NULL;
    vkg_error err = {0};
    vkg_status st = open_validated(&d, (vkg_device_options){0}, &err);
    *state = d;
    if (st == VKG_ERR_NO_DEVICE) {
        report_no_vulkan(err.message);
        return vk_test_allow_no_vulkan() ? 0 : -1;
    }
    if (st != VKG_OK) {
        fprintf(stderr, "opening the Vulkan device with validation: %s\n", err.message);
        return -1;
    }
    return 0;
}

int vk_test_cpu_group_setup(void **state) {
    vkg_device_options opts = {.quiet = 1};
    vkg_device *d = NULL;
    vkg_error err = {0};
    if (vkg_device_open("cpu", &opts, &d, &err) != VKG_OK) {
        fprintf(stderr, "opening the CPU device: %s\n", err.message);
        return -1;
    }
    *state = d;
    return 0;
}

static int teardown_failures;

int vk_test_group_teardown(void **state) {
    vkg_device *d = *state;
    if (!d) return 0;
    uint64_t messages = close_counting(d);
    if (!messages) return 0;
    fprintf(stderr, "%llu validation messages\n", (unsigned long long)messages);
    teardown_failures++;
    return -1;
}

int vk_test_exit_status(int failed) {
    if (teardown_failures)
        fprintf(stderr, "%d group teardown%s reported validation messages\n", teardown_failures,
                teardown_failures == 1 ? "" : "s");
    return failed + teardown_failures;
}

vkg_device *vk_test_device(void **state) {
    vkg_device *d = *state;
    if (!d) skip(); /* no Vulkan device, and VKG_TEST_ALLOW_NO_VULKAN set: the setup said so */
    assert_int_equal(vkg_device_validation_errors(d), 0);
    return d;
}

void vk_test_plan_init(vk_test_plan *tp) {
    memset(tp, 0, sizeof *tp);
    tp->plan.regions = tp->regions;
    tp->plan.steps = tp->steps;
    vkg_compile_options_default(&tp->plan.opts);
}

int vk_test_region(vk_test_plan *tp, vkg_region_kind kind, uint64_t bytes, const void *host) {
    assert_true(tp->plan.n_regions < 16);
    int r = tp->plan.n_regions++;
    tp->regions[r] = (vkg_region){.kind = kind, .tensor = VKG_NONE, .bytes = bytes, .host = host};
    return r;
}

vkg_step *vk_test_step(vk_test_plan *tp, vkg_kernel kernel) {
    assert_true(tp->plan.n_steps < 16);
    vkg_step *s = &tp->steps[tp->plan.n_steps++];
    memset(s, 0, sizeof *s);
    s->kernel = kernel;
    s->node = VKG_NONE;
    snprintf(s->label, sizeof s->label, "%s", vkg_kernel_name(kernel));
    for (int b = 0; b < VKG_MAX_BINDINGS; b++) s->bind[b].region = -1;
    s->barrier = 1;
    return s;
}

void vk_test_bind(vk_test_plan *tp, vkg_step *s, int slot, int region, int writes) {
    s->bind[slot] = (vkg_binding){.region = region, .offset = 0, .bytes = tp->regions[region].bytes, .writes = writes};
}

void vk_test_run(vkg_device *d, const vkg_plan *p, void **host, vkg_step_times *times) {
    void *session = NULL;
    vkg_error err = {0};
    if (d->ops->session_new(d->impl, p, NULL, NULL, &session, &err) != VKG_OK) fail_msg("session_new: %s", err.message);
    for (int r = 0; r < p->n_regions; r++)
        if (host[r] && p->regions[r].kind != VKG_REGION_CONSTANT &&
            d->ops->write(session, r, 0, host[r], p->regions[r].bytes, &err) != VKG_OK)
            fail_msg("write region %d: %s", r, err.message);
    if (d->ops->run(session, times, &err) != VKG_OK) fail_msg("run: %s", err.message);
    for (int r = 0; r < p->n_regions; r++)
        if (host[r] && p->regions[r].kind != VKG_REGION_CONSTANT &&
            d->ops->read(session, r, 0, host[r], p->regions[r].bytes, &err) != VKG_OK)
            fail_msg("read region %d: %s", r, err.message);
    d->ops->session_free(session);
}

void vk_test_fill(float *x, size_t n, uint64_t seed, float scale) {
    vkg_rng r;
    vkg_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * vkg_rng_uniform(&r) - 1.0f);
}

int vk_test_pair_setup(vkg_device **cpu, vkg_device **gpu) {
    vkg_device_options o = {.cpu_threads = 2, .quiet = 1};
    vkg_error err = {0};
    *gpu = NULL;
    if (vkg_device_open("cpu", &o, cpu, &err) != VKG_OK) return -1;
    void *g = NULL;
    int rc = vk_test_group_setup(&g);
    *gpu = g;
    if (rc != 0) {
        vkg_device_free(*cpu);
        *cpu = NULL;
    }
    return rc;
}

int vk_test_pair_teardown(vkg_device **cpu, vkg_device **gpu) {
    void *g = *gpu;
    *gpu = NULL;
    int rc = vk_test_group_teardown(&g);
    vkg_device_free(*cpu);
    *cpu = NULL;
    return rc;
}
