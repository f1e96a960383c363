/* Shared by the C kernels and the GLSL shaders: each kernel's parameter block is declared once,
 * in the header of its family, and passed as push constants (at most 128 bytes, 32-bit scalars
 * only so that the C struct and the std430 push-constant block have the same layout).
 *
 * Offsets and strides count elements (4 bytes) from the start of the binding, never bytes. */
#ifndef VKG_PARAMS_COMMON_H
#define VKG_PARAMS_COMMON_H

#ifdef VULKAN /* glslang defines VULKAN when compiling for Vulkan */
#define vkg_u32 uint
#define vkg_i32 int
#define vkg_f32 float
#define VKG_PARAMS_BEGIN(name) layout(push_constant) uniform name##_block {
#define VKG_PARAMS_END(name) } p;
#else
#include <stdint.h>
typedef uint32_t vkg_u32;
typedef int32_t vkg_i32;
typedef float vkg_f32;
#define VKG_PARAMS_BEGIN(name) typedef struct name {
#define VKG_PARAMS_END(name) } name;
#endif

/* "No runtime index": a dyn_index field with this value adds nothing. */
#define VKG_NO_INDEX 0xffffffffu

/* mask_rows (the fused attention's and softmax's causal mask): where it puts a batch's rows.
 * OWN_INDEX: batch entry i0 reads the index at dyn_index + i0 (the rows of several sequences,
 * each at its position); ONE_POSITION: every query row of an entry at that one position, the
 * row's own index within the entry not added (the G query heads of a group as rows: a batch's
 * decode step with grouped queries). */
#define VKG_MASK_ROWS_OWN_INDEX 1u
#define VKG_MASK_ROWS_ONE_POSITION 2u
#define VKG_MASK_ROWS_ALL (VKG_MASK_ROWS_OWN_INDEX | VKG_MASK_ROWS_ONE_POSITION)

#endif
