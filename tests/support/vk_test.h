/* Helpers for the Vulkan tests: a device opened with the Khronos validation layer (every test
 * asserts that it reported nothing, teardown included), and running a plan on any device through
 * its backend operations, so hand-made plans (no graph compiler involved) can be compared
 * between executors. */
#ifndef VKG_TEST_VK_TEST_H
#define VKG_TEST_VK_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/backend.h"
#include "vulkan/context.h"

/* Where no Vulkan device opens, the Vulkan tests fail, saying so: CI and every default run must
 * have one (lavapipe at least).  On a developer machine without Vulkan, VKG_TEST_ALLOW_NO_VULKAN=1
 * turns those failures into skips (cmocka skip()).  vk_test_allow_no_vulkan() tells whether it
 * is set; vk_test_no_vulkan(why), inside a test, fails it or skips it accordingly. */
int vk_test_allow_no_vulkan(void);
void vk_test_no_vulkan(const char *why);

/* The best Vulkan device with validation on; where none opens, see vk_test_no_vulkan.  Fails
 * the test when the validation layer is not active. */
vkg_device *vk_test_open(void);
/* The same with other settings (validation is always on). */
vkg_device *vk_test_open_with(vkg_device_options opts);
/* Frees the device and asserts that validation reported no error or warning, including the
 * messages of its teardown (objects leaked, for example). */
void vk_test_close(vkg_device *d);
/* For a test run on each executor by name: "cpu" the CPU device of test_open_cpu, else
 * vk_test_open(); fails the test where none opens.  vk_test_close_any closes either, the Vulkan
 * one as vk_test_close does. */
vkg_device *vk_test_open_named(const char *device);
void vk_test_close_any(vkg_device *d);
vkg_vk_context *vk_test_context(vkg_device *d);

/* One validated device for a whole CMocka group (pipelines compile once per device, and a cold
 * llvmpipe compile takes a second or more): the setup puts it in *state (where none opens, the
 * setup fails, or, with VKG_TEST_ALLOW_NO_VULKAN=1, puts NULL), vk_test_device() gives it to a
 * test (skipping the test when NULL) after
 * checking that nothing was reported so far, and the teardown closes it as vk_test_close does.
 * A test that changes the device's tuning restores it before returning. */
int vk_test_group_setup(void **state);
/* The same for the CPU device, so one list of tests can run on both (same teardown). */
int vk_test_cpu_group_setup(void **state);
int vk_test_group_teardown(void **state);
/* For a test file that checks Vulkan against the CPU: a 2-thread CPU device and the validated
 * Vulkan device of vk_test_group_setup (NULL where none opens and VKG_TEST_ALLOW_NO_VULKAN is
 * set); the teardown frees both and fails on any validation message. */
int vk_test_pair_setup(vkg_device **cpu, vkg_device **gpu);
int vk_test_pair_teardown(vkg_device **cpu, vkg_device **gpu);
/* What main returns: cmocka 1.1.5 prints a failed group teardown but leaves it out of the count
 * that cmocka_run_group_tests returns, so the count of failed tests is passed through this,
 * which adds the teardowns that reported validation messages (Vulkan objects left alive, say). */
int vk_test_exit_status(int failed);
vkg_device *vk_test_device(void **state);

/* A hand-made plan: regions and steps added one by one (at most 16 regions and 16 steps). */
typedef struct vk_test_plan {
    vkg_plan plan;
    vkg_region regions[16];
    vkg_step steps[16];
} vk_test_plan;

void vk_test_plan_init(vk_test_plan *tp);
/* Adds a region and returns its index; host is the data of a constant (borrowed), else NULL. */
int vk_test_region(vk_test_plan *tp, vkg_region_kind kind, uint64_t bytes, const void *host);
/* Adds a step; its bindings start unused (region -1) and barrier is set. */
vkg_step *vk_test_step(vk_test_plan *tp, vkg_kernel kernel);
/* Binds slot b of step s to a whole region. */
void vk_test_bind(vk_test_plan *tp, vkg_step *s, int slot, int region, int writes);

/* Runs tp on d once: host[r] (when non-NULL) is written to every non-constant region r first,
 * and every non-constant region is read back into host[r] afterwards.  times may be NULL. */
void vk_test_run(vkg_device *d, const vkg_plan *p, void **host, vkg_step_times *times);

/* Deterministic test data. */
void vk_test_fill(float *x, size_t n, uint64_t seed, float scale);

#endif
