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

#endif
