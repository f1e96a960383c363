/* The tables the code is generated from (src/graph/kernels.def, src/graph/ops.def,
 * shaders/params/unary_ops.def) hold together: what the compiler cannot check about their rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "cpu/kernels.h"
#include "graph/compile_internal.h"
#include "vulkan/pipelines.h"

/* Every shader is embedded under its file name and runs a family that can take it: its texel
 * bindings exist, and its 16-bit variant is a shader of the same family with a WEIGHT binding. */
static void test_shaders(void **state) {
    (void)state;
    int shaders_of[VKG_KERNEL_COUNT] = {0};
    for (int s = 0; s < VKG_SH_COUNT; s++) {
        const char *file = vkg_vk_shader_file((vkg_vk_shader)s);
        const vkg_spirv *spv = vkg_spirv_table;
        while (spv->name && strcmp(spv->name, file) != 0) spv++;
        if (!spv->name) fail_msg("shader %d (%s.comp) is not embedded", s, file);
        assert_true(spv->bytes > 0);
        vkg_kernel k = vkg_vk_shader_kernel((vkg_vk_shader)s);
        assert_true(k >= 0 && k < VKG_KERNEL_COUNT);
        shaders_of[k]++;
        uint32_t n = vkg_vk_shader_bindings((vkg_vk_shader)s);
        assert_int_equal(n, vkg_kernel_binding_count(k));
        assert_int_equal(vkg_vk_shader_texel_mask((vkg_vk_shader)s) >> n, 0);
        assert_int_equal(vkg_vk_shader_push_bytes((vkg_vk_shader)s), vkg_kernel_params_bytes(k));
        vkg_vk_shader b16 = vkg_vk_shader_b16_variant((vkg_vk_shader)s);
        if (b16 == VKG_SH_COUNT) continue;
        assert_true(b16 >= 0 && b16 < VKG_SH_COUNT);
        assert_int_equal(vkg_vk_shader_kernel(b16), k);
        assert_int_equal(vkg_vk_shader_b16_variant(b16), b16); /* a variant is its own */
        int weight = 0;
        for (int b = 0; b < vkg_kernel_binding_count(k); b++) weight += vkg_kernel_binding_elem(k, b) == VKG_ELEM_WEIGHT;
        if (weight != 1) fail_msg("%s has a 16-bit variant but %d WEIGHT bindings", file, weight);
    }
    for (int k = 0; k < VKG_KERNEL_COUNT; k++)
        if (shaders_of[k] == 0) fail_msg("kernel family %s has no shader", vkg_kernel_name((vkg_kernel)k));
}

/* Families: distinct names, parameter blocks that fit push constants, named slots, at least one
 * written; out-of-range questions get the documented answers. */
static void test_families(void **state) {
    (void)state;
    for (int k = 0; k < VKG_KERNEL_COUNT; k++) {
        const char *name = vkg_kernel_name((vkg_kernel)k);
        for (int j = 0; j < k; j++) assert_string_not_equal(name, vkg_kernel_name((vkg_kernel)j));
        uint32_t bytes = vkg_kernel_params_bytes((vkg_kernel)k);
        assert_true(bytes > 0 && bytes <= 128 && bytes % 4 == 0);
        int n = vkg_kernel_binding_count((vkg_kernel)k), writes = 0;
        assert_true(n >= 1 && n <= VKG_MAX_BINDINGS);
        for (int b = 0; b < n; b++) {
            const char *slot = vkg_kernel_binding_name((vkg_kernel)k, b);
            assert_true(strlen(slot) > 0 && strcmp(slot, "-") != 0);
            for (int c = 0; c < b; c++) assert_string_not_equal(slot, vkg_kernel_binding_name((vkg_kernel)k, c));
            writes += vkg_kernel_binding_writes((vkg_kernel)k, b);
        }
        if (writes < 1) fail_msg("kernel family %s writes no binding", name);
        assert_string_equal(vkg_kernel_binding_name((vkg_kernel)k, n), "-");
        assert_false(vkg_kernel_binding_writes((vkg_kernel)k, n));
    }
    assert_string_equal(vkg_kernel_name(VKG_KERNEL_COUNT), "?");
    assert_int_equal(vkg_kernel_binding_count(VKG_KERNEL_COUNT), 0);
    assert_string_equal(vkg_kernel_binding_name(VKG_KERNEL_COUNT, 0), "?");
    assert_int_equal(vkg_kernel_params_bytes(VKG_KERNEL_COUNT), 0);
}

/* The unary codes are 0 to LAST; the activations are the ops whose code is not COPY, and their
 * codes are what vkg_cpu_is_activation admits besides COPY. */
static void test_unary_codes(void **state) {
    (void)state;
    for (uint32_t code = 0; code <= VKG_UNARY_LAST; code++) assert_true(vkg_unary_op_known(code));
    assert_false(vkg_unary_op_known(VKG_UNARY_LAST + 1));
    assert_false(vkg_unary_op_known(0xffffffffu));
    int activations = 0, admitted = 0;
    for (int op = 0; op < VKG_OP_COUNT; op++) {
        const char *name = vkg_op_name((vkg_op)op);
        assert_true(strlen(name) > 0 && strcmp(name, "?") != 0);
        for (int j = 0; j < op; j++) assert_string_not_equal(name, vkg_op_name((vkg_op)j));
        uint32_t code = vkg_activation_code((vkg_op)op);
        if (code == VKG_UNARY_COPY) {
            assert_false(vkg_activation_fuses((vkg_op)op));
            continue;
        }
        activations++;
        assert_true(vkg_cpu_is_activation(code) && code != VKG_UNARY_SCALE && code != VKG_UNARY_CAUSAL);
        for (int j = 0; j < op; j++) assert_int_not_equal(code, vkg_activation_code((vkg_op)j));
    }
    for (uint32_t code = 0; code <= VKG_UNARY_LAST + 1; code++) admitted += vkg_cpu_is_activation(code);
    assert_int_equal(admitted, activations + 1); /* and COPY */
    assert_true(activations >= 5);
    assert_string_equal(vkg_op_name(VKG_OP_COUNT), "?");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shaders),
        cmocka_unit_test(test_families),
        cmocka_unit_test(test_unary_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
