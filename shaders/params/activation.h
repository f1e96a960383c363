/* The VKG_UNARY_* codes of params/unary_ops.def: the unary kernel's ops (params/unary.h), of
 * which the activations are also the matmul epilogue's `activation` (params/matmul.h), where
 * VKG_UNARY_COPY (0) means no activation.  GLSL gets them as constants, C as the enum
 * vkg_unary_op, checked to be 0 to VKG_UNARY_LAST, each once. */
#ifndef VKG_PARAMS_ACTIVATION_H
#define VKG_PARAMS_ACTIVATION_H

#ifdef VULKAN /* glslang defines VULKAN when compiling for Vulkan */
#define VKG_UNARY_OP(NAME, code) const uint VKG_UNARY_##NAME = code;
#define VKG_ACTIVATION(NAME, name, code, epilogue) const uint VKG_UNARY_##NAME = code;
#include "unary_ops.def"
#else
#include <stdint.h>

typedef enum vkg_unary_op {
#define VKG_UNARY_OP(NAME, code) VKG_UNARY_##NAME = code,
#define VKG_ACTIVATION(NAME, name, code, epilogue) VKG_UNARY_##NAME = code,
#include "unary_ops.def"
} vkg_unary_op;

enum {
    VKG_UNARY_COUNT = 0 /* + 1 per row */
#define VKG_UNARY_OP(NAME, code) + 1
#define VKG_ACTIVATION(NAME, name, code, epilogue) + 1
#include "unary_ops.def"
};
#define VKG_UNARY_LAST (VKG_UNARY_COUNT - 1) /* the largest code */

/* Every code below the count, and (the switch below) none twice: the codes are 0 to LAST. */
#define VKG_UNARY_OP(NAME, code) _Static_assert(code < VKG_UNARY_COUNT, "VKG_UNARY_" #NAME ": codes are 0 to rows - 1");
#define VKG_ACTIVATION(NAME, name, code, epilogue) VKG_UNARY_OP(NAME, code)
#include "unary_ops.def"

/* 1 for the code of a row of params/unary_ops.def (a duplicate code would not compile here). */
static inline int vkg_unary_op_known(uint32_t op) {
    switch (op) {
#define VKG_UNARY_OP(NAME, code) case VKG_UNARY_##NAME:
#define VKG_ACTIVATION(NAME, name, code, epilogue) case VKG_UNARY_##NAME:
#include "unary_ops.def"
        return 1;
    }
    return 0;
}
#endif

#endif
