/*
 * vkgraph: transformer models as static op graphs, run on any Vulkan GPU or on the CPU.
 *
 * The model of use, in four steps:
 *
 *   1. Build a graph.  vkg_graph_new(), then declare inputs, constants (weights you keep in host
 *      memory) and ops.  Every builder call checks shapes at once.  Builders return a tensor
 *      handle; on a mistake they return VKG_NONE and put the graph into an error state that names
 *      the op, its operands and their shapes (vkg_graph_status / vkg_graph_error).  Every later
 *      builder call on a graph in error returns VKG_NONE, so a model can be written as straight-line
 *      code and checked once at the end, as with cairo.
 *
 *   2. Mark outputs with vkg_output() and compile: vkg_plan_compile() orders the nodes, drops dead
 *      ones, fuses (scale + mask + softmax, bias + activation), computes lifetimes and packs every
 *      intermediate tensor into one arena.  The plan is backend-neutral: an ordered list of kernel
 *      dispatches over buffers.  vkg_plan_dump() prints exactly what will run.
 *
 *   3. Open a device ("cpu", "vulkan", "vulkan:N", or NULL for the best one) and create a session
 *      that runs the plan on it: vkg_session_new().  Weights are uploaded once.
 *
 *   4. For each run: vkg_session_set_input(), vkg_session_run(), vkg_session_get_output().
 *
 * Errors.  Every fallible call returns a vkg_status and, when given a vkg_error, fills in a message
 * a person can act on.  The library never exits or aborts on bad input.
 *
 * Shapes have 1 to 4 dimensions, outermost first (row-major).  Tensors are f32; token ids and
 * runtime indices are i32.  Constants (weights) may also be f16 or bf16: stored at 16 bits, read
 * as f32, every sum in f32.  The operand B of vkg_matmul and the table of vkg_embedding take them;
 * other operands must be f32, and ops refuse a 16-bit tensor where they cannot read one.
 *
 * Ownership.  Constant data passed to vkg_constant() is borrowed: it must stay valid while a plan
 * or session made from the graph exists.  A plan keeps a pointer to its graph: free sessions, then
 * plans, then the graph.
 */
#ifndef VKGRAPH_H
#define VKGRAPH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VKG_VERSION_STRING "0.1.0"
#define VKG_MAX_DIMS 4

typedef enum vkg_status {
    VKG_OK = 0,
    VKG_ERR_INVALID_ARGUMENT,   /* a wrong value passed by the caller                   */
    VKG_ERR_SHAPE,              /* operand shapes that do not fit the op                */
    VKG_ERR_OUT_OF_MEMORY,      /* host allocation failed                               */
    VKG_ERR_IO,                 /* a file could not be opened, read or written          */
    VKG_ERR_FORMAT,             /* a file's contents are malformed                      */
    VKG_ERR_NO_DEVICE,          /* no Vulkan loader or no device matching the request   */
    VKG_ERR_DEVICE,             /* a Vulkan call failed                                 */
    VKG_ERR_DEVICE_LOST,        /* the driver reset the GPU, or a run that timed out never
                                   finished: reopen the device                          */
    VKG_ERR_OUT_OF_DEVICE_MEMORY,
    VKG_ERR_TIMEOUT,            /* the GPU did not finish in time                       */
    VKG_ERR_UNSUPPORTED,        /* valid request the device or build cannot serve       */
    VKG_ERR_NOT_FOUND,          /* a named thing (tensor, token, file) does not exist   */
    VKG_ERR_NOT_FINITE,         /* a result holds NaN or Inf (an overflow): no answer   */
    VKG_ERR_CANCELLED           /* a callback of the caller's asked to stop             */
} vkg_status;

/* A message for the human, filled by fallible calls when non-NULL. */
typedef struct vkg_error {
    vkg_status status;
    char message[512];
} vkg_error;

const char *vkg_status_name(vkg_status status);

/* ---------------------------------------------------------------------------------------------
 * Graphs
 * ------------------------------------------------------------------------------------------- */

typedef struct vkg_graph vkg_graph;
typedef int32_t vkg_tensor;        /* a node of a graph; VKG_NONE is "no tensor" / an error     */
#define VKG_NONE ((vkg_tensor)-1)

typedef enum vkg_dtype {
    VKG_F32 = 0,
    VKG_I32 = 1,
    VKG_F16 = 2,     /* IEEE 754 half: constants only                                        */
    VKG_BF16 = 3     /* bfloat16 (the upper half of an f32): constants only                   */
} vkg_dtype;
/* Bytes per element (4, 4, 2, 2) and the name ("f32", "i32", "f16", "bf16"); 0 and "?" for a value
 * that is not a vkg_dtype. */
size_t vkg_dtype_size(vkg_dtype dtype);
const char *vkg_dtype_name(vkg_dtype dtype);

vkg_graph *vkg_graph_new(void);                 /* NULL only when out of memory             */
void vkg_graph_free(vkg_graph *g);
vkg_status vkg_graph_status(const vkg_graph *g);
const char *vkg_graph_error(const vkg_graph *g); /* "" when there is no error               */

/* Shape and facts of a tensor.  ndim is returned; shape[] gets ndim entries.  Builders refuse shapes
 * whose element count, byte size or strides would not fit in 63 bits, so vkg_tensor_numel never
 * overflows (0 for a handle that is not a tensor of g). */
int vkg_tensor_shape(const vkg_graph *g, vkg_tensor t, int64_t shape[VKG_MAX_DIMS]);
int64_t vkg_tensor_numel(const vkg_graph *g, vkg_tensor t);
/* The name given with vkg_name; else the output's name, the leaf's name, or the op ("matmul"). */
const char *vkg_tensor_name(const vkg_graph *g, vkg_tensor t);
/* Gives t a name for people: dumps, profiles, traces and compare reports show it, and vkg_find
 * finds it after the leaves and outputs.  The name is copied; it need not be unique, and it does
 * not change what the tensor is bound to as an input, constant, state or output.  A tensor not of
 * this graph, or a NULL or empty name, puts the graph into its error state; on a graph already in
 * error nothing happens.  Returns the graph's status.  Models name nodes by module path, as
 * Hugging Face does: "h.3.attn.softmax", "h.3.mlp.c_fc", "ln_f", "logits". */
vkg_status vkg_name(vkg_graph *g, vkg_tensor t, const char *name);
/* Sum of the element counts of every constant: a model's parameter count. */
int64_t vkg_graph_constant_numel(const vkg_graph *g);

/* Leaves.  Names must be unique within a graph (they key dumps and lookups). */
vkg_tensor vkg_input(vkg_graph *g, const char *name, vkg_dtype dtype, int ndim, const int64_t *shape);
vkg_tensor vkg_constant(vkg_graph *g, const char *name, vkg_dtype dtype, int ndim, const int64_t *shape,
                        const void *data);
/* A persistent tensor (e.g. a KV cache): a session keeps its value from one run to the next, it
 * starts at zero, and only vkg_write_at() changes it. */
vkg_tensor vkg_state(vkg_graph *g, const char *name, int ndim, const int64_t *shape);
/* A runtime integer set before each run with vkg_session_set_index() (e.g. the number of tokens
 * already in a cache), so one compiled plan serves every position. */
vkg_tensor vkg_index(vkg_graph *g, const char *name);

/* Marks t as an output called name (the same tensor may be an output once). */
vkg_status vkg_output(vkg_graph *g, const char *name, vkg_tensor t);
/* The input, constant, state or output called name; else the first node given that name by vkg_name. */
vkg_tensor vkg_find(const vkg_graph *g, const char *name);

/* Ops.  Shapes in the comments: [..] means any leading dimensions. */
#define VKG_TRANSPOSE_A 1u
#define VKG_TRANSPOSE_B 2u
/* a [.., M, K] @ b [.., K, N] (+ bias [N]) -> [.., M, N].  Leading (batch) dimensions broadcast
 * numpy-style; flags transpose the last two dimensions of an operand; bias may be VKG_NONE. */
vkg_tensor vkg_matmul(vkg_graph *g, vkg_tensor a, vkg_tensor b, vkg_tensor bias, unsigned flags);
vkg_tensor vkg_add(vkg_graph *g, vkg_tensor a, vkg_tensor b);     /* numpy broadcasting */
vkg_tensor vkg_mul(vkg_graph *g, vkg_tensor a, vkg_tensor b);     /* numpy broadcasting */
vkg_tensor vkg_scale(vkg_graph *g, vkg_tensor x, float s);
vkg_tensor vkg_softmax(vkg_graph *g, vkg_tensor x);              /* over the last axis */
/* Causal mask on scores [.., Tq, Tk]: entry (i, j) becomes -inf when j > i + offset, so a block
 * of queries can sit after a cached prefix of offset tokens.  dyn_offset (a vkg_index, or
 * VKG_NONE) is added to offset at run time. */
vkg_tensor vkg_mask_causal(vkg_graph *g, vkg_tensor x, int32_t offset, vkg_tensor dyn_offset);
/* The same within a sliding window (Mistral): query i, at position p = i + offset (+ dyn_offset),
 * sees the keys p - window < j <= p, the last `window` positions; window 0 is vkg_mask_causal. */
vkg_tensor vkg_mask_causal_window(vkg_graph *g, vkg_tensor x, int32_t offset, vkg_tensor dyn_offset,
                                  uint32_t window);
typedef enum vkg_mask_kind {
    VKG_MASK_BOOL = 0,     /* mask != 0 keeps the score, 0 makes it -inf (weight exactly 0) */
    VKG_MASK_ADDITIVE = 1  /* the mask is added to the scores                               */
} vkg_mask_kind;
vkg_tensor vkg_mask(vkg_graph *g, vkg_tensor x, vkg_tensor mask, vkg_mask_kind kind);
/* Over the last axis: gamma * (x - mean) / sqrt(var + eps) + beta; gamma, beta [C] or VKG_NONE. */
vkg_tensor vkg_layernorm(vkg_graph *g, vkg_tensor x, vkg_tensor gamma, vkg_tensor beta, float eps);
/* Over the last axis: x / sqrt(mean(x^2) + eps) * weight, Llama's RMSNorm, in one step; weight [C]
 * or VKG_NONE.  On heads [.., H, D] with weight [D] it normalises each head (Qwen3's q_norm). */
/* silu(gate) * up, element-wise, gate and up of one shape (Llama's gated MLP).  Where up is a
 * matmul's result read by nothing else, the product is that matmul's epilogue: gate is read
 * once and up never goes through memory. */
vkg_tensor vkg_swiglu(vkg_graph *g, vkg_tensor gate, vkg_tensor up);
vkg_tensor vkg_rms_norm(vkg_graph *g, vkg_tensor x, vkg_tensor weight, float eps);
/* Rotary position embedding as Hugging Face's Llama applies it (rotate_half: the halves of each
 * row rotated together): x [.., T, D] (at most 4 dimensions, read through strides: heads split
 * from a projection cost no copy) -> the same shape, row t at position offset + dyn_offset + t
 * (dyn_offset a vkg_index or VKG_NONE), with cos_sin [P, D] a table of P positions whose row p
 * holds cos(p inv_freq_i) for i < D/2, then sin(p inv_freq_i) (vkg_rope_table fills it).  A
 * position outside 0 .. P-1 gives NaN. */
vkg_tensor vkg_rope(vkg_graph *g, vkg_tensor x, vkg_tensor cos_sin, int32_t offset, vkg_tensor dyn_offset);
/* vkg_rope over the first `rotated` entries of axis -3 of x [.., n, T, D] (1 <= rotated <= n);
 * the others are copied as they are.  Heads [n, T, D] viewed from one q/k/v projection come out
 * as queries and keys rotated beside the values, in one step.  positions (VKG_NONE, or an i32
 * tensor [T] in place of dyn_offset) puts row t at offset + positions[t]: the rows of several
 * sequences, each at its own position, rotated in one step. */
vkg_tensor vkg_rope_heads(vkg_graph *g, vkg_tensor x, vkg_tensor cos_sin, int32_t offset, vkg_tensor dyn_offset,
                          vkg_tensor positions, int64_t rotated);
/* Activations, element-wise.  A GELU or silu that follows a matmul (and its bias) is fused into
 * the matmul's epilogue; relu runs as a step of its own.  At x = +inf each gives +inf, at -inf 0
 * (-0 for the GELUs and silu); NaN stays NaN, except that relu gives 0. */
vkg_tensor vkg_gelu(vkg_graph *g, vkg_tensor x);       /* tanh approximation, as GPT-2:
                                                          0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
vkg_tensor vkg_gelu_erf(vkg_graph *g, vkg_tensor x);   /* exact: x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) */
vkg_tensor vkg_quick_gelu(vkg_graph *g, vkg_tensor x); /* x sigmoid(1.702 x)                          */
vkg_tensor vkg_silu(vkg_graph *g, vkg_tensor x);       /* x sigmoid(x), also called swish             */
vkg_tensor vkg_relu(vkg_graph *g, vkg_tensor x);       /* x > 0 ? x : 0                               */
/* table [V, C], ids (i32) of any shape S -> [S.., C].  An id outside [0, V) gives a zero row. */
vkg_tensor vkg_embedding(vkg_graph *g, vkg_tensor table, vkg_tensor ids);

/* Data movement.  These are views (no copy) wherever the consumer can read strides. */
vkg_tensor vkg_reshape(vkg_graph *g, vkg_tensor x, int ndim, const int64_t *shape); /* one -1 allowed */
vkg_tensor vkg_permute(vkg_graph *g, vkg_tensor x, const int *axes);  /* out dim i = in dim axes[i] */
vkg_tensor vkg_transpose(vkg_graph *g, vkg_tensor x, int axis0, int axis1);
vkg_tensor vkg_slice(vkg_graph *g, vkg_tensor x, int axis, int64_t start, int64_t length);
vkg_tensor vkg_concat(vkg_graph *g, vkg_tensor a, vkg_tensor b, int axis);
vkg_tensor vkg_copy(vkg_graph *g, vkg_tensor x);                     /* a contiguous copy */
/* Writes x into the state tensor along axis at position offset + dyn_offset (a vkg_index or
 * VKG_NONE) and returns the state after the write: read the state through the returned handle. */
vkg_tensor vkg_write_at(vkg_graph *g, vkg_tensor state, vkg_tensor x, int axis, int64_t offset,
                        vkg_tensor dyn_offset);

/* ---------------------------------------------------------------------------------------------
 * Plans
 * ------------------------------------------------------------------------------------------- */

typedef struct vkg_plan vkg_plan;

typedef struct vkg_compile_options {
    int fuse;                    /* fuse scale+mask+softmax, bias/activation into matmul (default 1) */
    int in_place;                /* run element-wise ops in place where safe (default 1)       */
    uint32_t alignment;          /* byte alignment of arena offsets (default 256)              */
    uint64_t max_binding_bytes;  /* largest range one binding may span; bigger operands are
                                    split over several steps (default 128 MiB)                 */
    int read_16bit;              /* 1: kernels read f16/bf16 constants as stored (default);
                                    0: the device cannot, so the plan holds them as f32 and the
                                    session widens them once at upload                          */
} vkg_compile_options;

void vkg_compile_options_default(vkg_compile_options *opts);
/* opts may be NULL for the defaults. */
vkg_status vkg_plan_compile(const vkg_graph *g, const vkg_compile_options *opts, vkg_plan **out,
                            vkg_error *err);
void vkg_plan_free(vkg_plan *p);

typedef struct vkg_memory_stats {
    uint64_t arena_bytes;        /* what the planner chose                                    */
    uint64_t naive_bytes;        /* every intermediate in its own buffer                      */
    uint64_t lower_bound_bytes;  /* largest total of intermediates alive at one step          */
    uint64_t constant_bytes;     /* weights, as the device holds them                          */
    int steps;
    int in_place_steps;
} vkg_memory_stats;
void vkg_plan_memory(const vkg_plan *p, vkg_memory_stats *stats);
int vkg_plan_step_count(const vkg_plan *p);
/* Floating-point operations of the plan's matmul steps, 2 per multiply-add (what a GFLOP/s
 * figure counts; the other steps are not counted). */
double vkg_plan_matmul_flops(const vkg_plan *p);

typedef enum vkg_dump_format { VKG_DUMP_TEXT = 0, VKG_DUMP_DOT = 1, VKG_DUMP_JSON = 2 } vkg_dump_format;
vkg_status vkg_graph_dump(const vkg_graph *g, FILE *f, vkg_dump_format fmt);
vkg_status vkg_plan_dump(const vkg_plan *p, FILE *f, vkg_dump_format fmt);

/* Layers [begin, end) of a model.  What has no layer goes with its neighbours: what comes before
 * every layer (GPT-2's embedding) is shown when begin is 0, what comes after them all (ln_f, the
 * head) when end reaches the layer count, and anything between layers with the layer before it. */
typedef struct vkg_dump_layers { int begin, end; } vkg_dump_layers;
#define VKG_DUMP_ALL_LAYERS ((vkg_dump_layers){0, INT32_MAX})

/* 1 + the largest layer of any node: the model's layer count; 0 for a graph without layers. */
int vkg_graph_layer_count(const vkg_graph *g);

vkg_status vkg_graph_dump_layers(const vkg_graph *g, FILE *f, vkg_dump_format fmt, vkg_dump_layers range);
vkg_status vkg_plan_dump_layers(const vkg_plan *p, FILE *f, vkg_dump_format fmt, vkg_dump_layers range);

/* ---------------------------------------------------------------------------------------------
 * Devices and sessions
 * ------------------------------------------------------------------------------------------- */

typedef struct vkg_device vkg_device;

/* Which matmul shaders a Vulkan device runs. */
typedef enum vkg_matmul_shaders {
    VKG_MATMUL_SHADERS_AUTO = 0,  /* the device's best: texel buffers on a software rasteriser,
                                     shared-memory tiles on a GPU                              */
    VKG_MATMUL_SHADERS_TEXEL = 1, /* A and B read through uniform texel buffers (where the
                                     device supports the formats)                              */
    VKG_MATMUL_SHADERS_TILED = 2  /* shared-memory tiles                                       */
} vkg_matmul_shaders;

/* Every setting of a device; all zero is the default of each.  The library reads no
 * environment variables: the vkgraph tool maps its VKG_* variables onto these fields. */
typedef struct vkg_device_options {
    int cpu_threads;      /* CPU executor threads; 0 = number of cores                   */
    int validation;       /* enable the Khronos validation layer; validation messages are
                             counted (vkg_device_validation_errors) and printed to stderr   */
    int quiet;            /* no notes on stderr (e.g. "falling back to the CPU")           */
    int profile;          /* every session records per-step times (vkg_device_profile_*)  */
    /* Vulkan only; the CPU executor ignores them. */
    uint32_t timeout_ms;  /* how long one submission may take before VKG_ERR_TIMEOUT; 0:
                             60000.  A long run goes to the device in pieces of bounded work
                             (a few seconds on a software device), each within it          */
    int no_sync_validation; /* with validation: leave out its synchronization checks       */
    int no_pipeline_cache; /* neither read nor write the pipeline cache file
                              ($XDG_CACHE_HOME/vkgraph, else ~/.cache/vkgraph)              */
    int print_steps;      /* one line per step on stderr as a session is made: shader,
                             workgroups, specialization                                    */
    int no_host_import;   /* on a device whose memory is the host's, copy constants to the
                             device as on a discrete GPU instead of importing them where
                             they lie (VK_EXT_external_memory_host)                        */
    vkg_matmul_shaders matmul;
} vkg_device_options;

/* spec: "cpu", "vulkan" (best Vulkan device), "vulkan:N" (N-th in vkgraph devices order), or
 * NULL / "auto": the best Vulkan GPU, else the CPU executor: where the only Vulkan device renders
 * in software (Mesa's lavapipe), which the CPU executor outruns, silently ("vulkan" opens it);
 * with no Vulkan at all, with a note on stderr. */
vkg_status vkg_device_open(const char *spec, const vkg_device_options *opts, vkg_device **out,
                           vkg_error *err);
void vkg_device_free(vkg_device *d);
const char *vkg_device_name(const vkg_device *d);
int vkg_device_is_cpu(const vkg_device *d);
/* 1 for a Vulkan device that renders in software on the CPU (Mesa's lavapipe), else 0. */
int vkg_device_is_software(const vkg_device *d);
uint64_t vkg_device_validation_errors(const vkg_device *d);
/* 1 once a run that timed out was given up while it may still be running (VKG_ERR_DEVICE_LOST
 * after VKG_ERR_TIMEOUT), else 0 (also for NULL).  Then the device, and the memory that work may
 * read (a model's weights), are never freed; and a process should end with _exit once its output
 * is flushed, since exit handlers tear down libraries the driver's threads may still be using
 * (lavapipe's LLVM: a crash at exit). */
int vkg_device_has_abandoned_work(const vkg_device *d);
/* The most bytes of device memory (Vulkan allocations of sessions and staging) held at once
 * since d opened; 0 on the CPU executor, whose memory is the host's. */
uint64_t vkg_device_peak_memory_bytes(const vkg_device *d);
/* 1 when d's matmuls read a weight matrix faster as [N, K] (each output's weights contiguous,
 * y = x @ W^T with VKG_TRANSPOSE_B) than as [K, N]: a model free to choose (GPT-2's projections,
 * stored [K, N]) holds its matrices that way for d.  1 on the CPU executor and lavapipe, 0 on GPUs. */
int vkg_device_prefers_transposed_weights(const vkg_device *d);
/* Writes the limits that shape a plan for this device (alignment, largest binding) to opts. */
void vkg_device_compile_options(const vkg_device *d, vkg_compile_options *opts);

/* The widest instruction set the CPU executor's kernels may use, for the whole process (as
 * oneDNN's dnnl_set_max_cpu_isa): "avx512", "avx2", "portable" (vectors of 4 floats, plain C),
 * or "native" / NULL (every one this CPU has: the default).  It answers what a machine without
 * AVX-512 gets, on one with it, and lets the variants be compared: AVX2 and AVX-512 give the same
 * bits, the portable one (no fused multiply-adds) differs by rounding.  A name not among these is
 * VKG_ERR_INVALID_ARGUMENT.  Call it before sessions run: a kernel that is running keeps its
 * variant. */
vkg_status vkg_cpu_set_max_isa(const char *isa, vkg_error *err);
/* The instruction set the CPU executor's kernels use: "avx512", "avx2" or "portable". */
const char *vkg_cpu_isa(void);

/* Prints every Vulkan device (name, type, driver, limits, features) to f. */
vkg_status vkg_devices_print(FILE *f, vkg_error *err);
/* Prints one Vulkan device as vkg_devices_print does: vulkan:index, or the default (best usable)
 * one for index -1.  An index past the last device gives VKG_ERR_NO_DEVICE naming the range. */
vkg_status vkg_devices_print_one(FILE *f, int index, vkg_error *err);

typedef struct vkg_session vkg_session;

vkg_status vkg_session_new(vkg_device *d, const vkg_plan *p, vkg_session **out, vkg_error *err);
/* A session for another plan of the same model (e.g. a T-token prefill beside a 1-token decode
 * plan): constants and states with the same name and size in both plans (constants also with
 * the same host data) are shared with `with`, not allocated or uploaded again, so the two
 * sessions use one copy of the weights and one KV cache.  `with` must be on the same device and
 * outlive the new session. */
vkg_status vkg_session_new_shared(vkg_device *d, const vkg_plan *p, vkg_session *with, vkg_session **out,
                                  vkg_error *err);
void vkg_session_free(vkg_session *s);
/* bytes must equal the tensor's size. */
vkg_status vkg_session_set_input(vkg_session *s, vkg_tensor input, const void *data, size_t bytes,
                                 vkg_error *err);
vkg_status vkg_session_set_index(vkg_session *s, vkg_tensor index, int32_t value, vkg_error *err);
vkg_status vkg_session_run(vkg_session *s, vkg_error *err);
vkg_status vkg_session_get_output(vkg_session *s, vkg_tensor output, void *data, size_t bytes,
                                  vkg_error *err);
/* Reads (or zeroes, data == NULL) a state tensor. */
vkg_status vkg_session_get_state(vkg_session *s, vkg_tensor state, void *data, size_t bytes,
                                 vkg_error *err);
/* Writes a state tensor (bytes must equal its size): a KV cache saved with
 * vkg_session_get_state, put back. */
vkg_status vkg_session_set_state(vkg_session *s, vkg_tensor state, const void *data, size_t bytes,
                                 vkg_error *err);
/* Copies `count` blocks of `bytes` bytes from state src to state dst (another of the same size)
 * on the device, block i at byte i * stride of each: a KV cache [2, Hkv, S, D]'s first n positions
 * are 2 Hkv blocks of n D floats, S D floats apart. */
vkg_status vkg_session_copy_state(vkg_session *s, vkg_tensor src, vkg_tensor dst, size_t stride, size_t count,
                                  size_t bytes, vkg_error *err);
/* The same from byte src_offset of src to byte dst_offset of dst, which may be the same state
 * (one slot's cache to another's in a cache of several): the blocks must not overlap. */
vkg_status vkg_session_copy_state_at(vkg_session *s, vkg_tensor src, size_t src_offset, vkg_tensor dst,
                                     size_t dst_offset, size_t stride, size_t count, size_t bytes, vkg_error *err);
vkg_status vkg_session_reset_state(vkg_session *s, vkg_error *err);

/* Profiling.  A session with profiling on records every run and every step of it (Vulkan
 * timestamp queries on a GPU, mapped onto the host clock; the wall clock on the CPU) in its
 * device's profile, which prints as a table (step, op, node, shape, microseconds, share of the
 * total) and writes as a Chrome trace JSON file (chrome://tracing, Perfetto): one track per
 * session, a span per run around its steps, times on the host's CLOCK_MONOTONIC.  Turn it on for
 * one session, or for every session of a device with vkg_device_options.profile. */
vkg_status vkg_session_enable_profiling(vkg_session *s, int enable, vkg_error *err);
/* Names the session in the profile and the trace ("decode", "prefill (T=27)"); at most 63 bytes
 * are kept; NULL clears it. */
void vkg_session_set_label(vkg_session *s, const char *label);
/* Ends the span that the device's previous mark opened and opens one named `name` (NULL: ends
 * only), on the trace's "marks" track: e.g. one span per generated token.  Kept only when the
 * device profiles. */
vkg_status vkg_device_profile_mark(vkg_device *d, const char *name, vkg_error *err);
/* What vkg_device_profile_print adds after each session's step table: the time summed by layer
 * (nodes named "h.<i>.", as GPT-2's are; steps outside a layer are "embed", "head" or "other")
 * and/or by op kind (the step's kernel without what was fused into it). */
enum { VKG_PROFILE_STEPS = 0, VKG_PROFILE_BY_LAYER = 1, VKG_PROFILE_BY_OP = 2 };
vkg_status vkg_device_profile_print(const vkg_device *d, unsigned group_by, FILE *f);
vkg_status vkg_device_profile_write_trace(const vkg_device *d, const char *path, vkg_error *err);
/* Step records in d's profile so far: where a later vkg_device_profile_kernel_seconds starts. */
size_t vkg_device_profile_event_count(const vkg_device *d);
/* Seconds of the profiled steps recorded from record `from` on whose kernel is `kernel` ("matmul",
 * with whatever was fused into it); *steps (may be NULL) gets the steps recorded from `from` on,
 * of every kernel, so a caller can tell a run recorded whole. */
double vkg_device_profile_kernel_seconds(const vkg_device *d, size_t from, const char *kernel, int *steps);

/* ---------------------------------------------------------------------------------------------
 * Where two devices part ways: one plan run step by step on a device under test and on a
 * reference, every step's output compared, so that "the logits differ" becomes "step 6,
 * softmax+scale+causal [12, 480, 480], worst at [3, 320, 17]".
 * ------------------------------------------------------------------------------------------- */

typedef struct vkg_step_comparison {
    int step;                      /* the plan step                                           */
    char label[48];                /* its kernel with what was fused in: "softmax+scale+causal" */
    char node[64];                 /* the graph node it computes                             */
    int ndim;
    int64_t shape[VKG_MAX_DIMS];   /* of that node                                           */
    uint64_t elements;             /* floats the step wrote and that were compared            */
    double nmse;                   /* sum (test - ref)^2 / sum ref^2, over positions finite on
                                      both sides                                             */
    double threshold;              /* the op's conformance threshold                          */
    double max_abs_diff;           /* the largest |test - ref| over those positions            */
    int64_t worst[VKG_MAX_DIMS];   /* where it is, in the node's coordinates (worst_ndim axes:
                                      1, a flat index, when the step wrote part of a tensor
                                      that is not laid out row-major)                         */
    int worst_ndim;
    float worst_value, worst_reference;
    int64_t nonfinite_mismatches;  /* positions where inf or NaN appear on one side only     */
    int fails;                     /* nmse above the threshold, or a non-finite mismatch      */
    /* The drift: the same measures for a copy of `test` that ran every step before this one on
     * what it computed itself, as a plain run does.  It carries the rounding of all those steps,
     * so it is shown, never held to the threshold. */
    double drift_nmse, drift_max_abs_diff;
    int64_t drift_nonfinite_mismatches;
} vkg_step_comparison;

/* Runs the plan of `test` and `reference` (two sessions of the same vkg_plan, usually on two
 * devices, with the same inputs, indices and states set) one step at a time, and compares what
 * each step wrote.  Each step is judged on its own inputs: before `test` runs it, every byte
 * range the step binds, constants aside, is set from `reference`, so its difference is its own
 * rounding against the op's threshold (the weights stay each side's own: a corrupted weight is
 * found at the first step that reads it, and only there).  Beside it, the drift: a third
 * session on test's device, sharing its constants, runs the plan freely from test's inputs and
 * states, and is compared at every step too.  On VKG_OK, *out holds one entry per step (free it
 * with free()), *first_failure the first step whose entry fails, or -1.  `reference` ends as a
 * full run leaves it; `test` holds the reference's values where it was given them. */
vkg_status vkg_session_compare(vkg_session *test, vkg_session *reference, vkg_step_comparison **out,
                               int *first_failure, vkg_error *err);

/* ---------------------------------------------------------------------------------------------
 * Random numbers: a small seeded generator (xoshiro256**), the same sequence on every machine,
 * for examples, tests and sampling.
 * ------------------------------------------------------------------------------------------- */

typedef struct vkg_rng { uint64_t s[4]; } vkg_rng;
void vkg_rng_seed(vkg_rng *r, uint64_t seed);
uint64_t vkg_rng_next(vkg_rng *r);
float vkg_rng_uniform(vkg_rng *r);                      /* [0, 1)                          */
float vkg_rng_normal(vkg_rng *r);                       /* mean 0, standard deviation 1    */
void vkg_rng_fill_normal(vkg_rng *r, float *x, size_t n, float std);
/* Leaves r where n calls of vkg_rng_normal would, in microseconds whatever n (a jump ahead: the
 * generator is linear): the blocks of a long fill can then be drawn on several threads with the
 * same values. */
void vkg_rng_skip_normals(vkg_rng *r, size_t n);

/* ---------------------------------------------------------------------------------------------
 * Ground utilities: the clock, shapes as text, the machine's memory.
 * ------------------------------------------------------------------------------------------- */

/* "[2, 10, 64]" into buf (cut to size, always terminated); returns buf. */
const char *vkg_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);
/* Physical memory in bytes (sysconf _SC_PHYS_PAGES x page size); UINT64_MAX when unknown, so
 * that an unknown size never refuses anything. */
uint64_t vkg_host_memory_bytes(void);
/* UTF-8.  vkg_utf8_encode writes cp (at most U+10FFFF) as 1 to 4 bytes to out and returns how
 * many.  vkg_utf8_decode reads the character at s[0..len) (len >= 1) and returns the bytes it
 * takes; a sequence that is not well-formed (RFC 3629: a stray or missing continuation byte, an
 * overlong form, a surrogate, past U+10FFFF) sets *cp to VKG_UTF8_INVALID and takes its maximal
 * subpart (at least 1 byte), so that each such run shows as one U+FFFD, as Python's and Hugging
 * Face's "replace" decoding shows it. */
#define VKG_UTF8_INVALID 0xFFFFFFFFu
size_t vkg_utf8_encode(uint32_t cp, char *out);
size_t vkg_utf8_decode(const char *s, size_t len, uint32_t *cp);
/* Seconds on the host's CLOCK_MONOTONIC: the clock of profiles, traces and model timings. */
double vkg_clock_seconds(void);
/* Writes s as a JSON string: quotes, backslashes and control characters escaped, other bytes as
 * they are. */
void vkg_json_write_string(FILE *f, const char *s);

/* ---------------------------------------------------------------------------------------------
 * Printing arrays, for examples and lessons.
 * ------------------------------------------------------------------------------------------- */

/* Formats x [rows, cols] as numpy prints it after rounding to `decimals` ("[[0.12 0.1  1.  ]]",
 * rows on separate lines).  Returns buf; output longer than size is cut, always terminated. */
char *vkg_format_array(char *buf, size_t size, const float *x, int rows, int cols, int decimals);

#ifdef __cplusplus
}
#endif
#endif
