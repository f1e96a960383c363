/* The conformance cases: every op, alone and in each fusion the compiler makes, over sweeps of
 * shapes chosen to break tiled kernels: 1, small primes, sizes that divide no tile, and GPT-2's
 * own sizes (768, 3072, the 768 x 50257 logits, attention rows of T = 1024).
 *
 * A builder reads its sweep point d[] (meaning given by the sweep's comment), builds the graph
 * with the conf_* helpers and marks what to compare with conf_output. */
#include "vkgraph_conformance.h"
#include "conformance/conformance_cases.h"
#include "vkgraph_lesson.h"
#include "models/rope.h"
#include "graph/graph_build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { Q = VKG_CONFORMANCE_QUICK, D = VKG_CONFORMANCE_DEFAULT, F = VKG_CONFORMANCE_FULL, END = -1 };

#define EW VKG_CONFORMANCE_NMSE_ELEMENTWISE
#define RED VKG_CONFORMANCE_NMSE_REDUCTION
#define MODEL VKG_CONFORMANCE_NMSE_MODEL
#define MM16 VKG_CONFORMANCE_NMSE_MATMUL_16BIT
#define EMB16 VKG_CONFORMANCE_NMSE_EMBEDDING_16BIT
#define MODEL16 VKG_CONFORMANCE_NMSE_MODEL_16BIT
#define S(...) ((const int64_t[]){__VA_ARGS__})

/* ---- sweeps ---------------------------------------------------------------------------------- */

/* {R, C}: rows and columns of an element-wise op (C the contiguous axis). */
static const conf_point sweep_rc[] = {
    {Q, {1, 1}},    {Q, {3, 7}},     {Q, {13, 31}},    {Q, {17, 33}},   {D, {7, 65}},   {D, {31, 127}},
    {D, {65, 257}}, {D, {64, 768}},  {D, {3, 3072}},   {F, {1024, 768}}, {F, {128, 3072}}, {F, {1, 50257}},
    {END, {0}}};
/* {R, C}: many short rows.  llvmpipe ends a shader invocation's loops after 65535 iterations in
 * all, silently; rows are where a few workgroups loop longest (see record.c). */
static const conf_point sweep_many_rows[] = {{Q, {30000, 100}}, {Q, {100000, 10}}, {D, {12288, 1024}}, {END, {0}}};
/* {H, Tq, Tk}: attention scores [H, Tq, Tk], queries after a cache of Tk - Tq tokens. */
static const conf_point sweep_scores[] = {
    {Q, {1, 1, 1}},   {Q, {2, 3, 3}},   {Q, {3, 7, 13}},    {D, {4, 17, 17}},    {D, {2, 33, 65}},
    {D, {12, 64, 64}}, {D, {1, 127, 257}}, {D, {12, 1, 769}}, {F, {12, 1024, 1024}}, {END, {0}}};
/* {M, N, K}: C [M, N] = A [M, K] B [K, N]. */
static const conf_point sweep_mnk[] = {
    {Q, {1, 1, 1}},       {Q, {3, 7, 13}},      {Q, {17, 33, 65}},     {Q, {2, 31, 17}},
    {D, {31, 127, 257}},  {D, {65, 33, 127}},   {D, {127, 65, 257}},   {D, {128, 768, 768}},
    {D, {768, 768, 768}}, {F, {128, 3072, 768}}, {F, {768, 3072, 768}}, {F, {1024, 768, 3072}},
    {END, {0}}};
/* {M, N, K} for the epilogue variants: GPT-2's layer shapes at a short sequence. */
static const conf_point sweep_mnk_layer[] = {
    {Q, {1, 1, 1}},      {Q, {3, 7, 13}},      {Q, {17, 33, 65}},     {D, {31, 127, 257}},
    {D, {33, 65, 17}},   {D, {64, 3072, 768}}, {D, {64, 768, 3072}},  {F, {1024, 3072, 768}},
    {END, {0}}};
/* {M, N, K} for operands read through transposes and broadcast batches (batch 2 x 3). */
static const conf_point sweep_mnk_small[] = {
    {Q, {1, 1, 1}}, {Q, {3, 7, 13}}, {D, {17, 33, 65}}, {D, {64, 64, 64}}, {D, {31, 257, 127}},
    {F, {257, 768, 768}}, {END, {0}}};
/* {M, N, K} for an epilogue's activation at its limits: never one column alone, so that some
 * outputs stay finite whatever the bias holds (a case of non-finite values only would pass any
 * scaling of them). */
static const conf_point sweep_mnk_extreme[] = {
    {Q, {3, 7, 13}}, {Q, {17, 33, 65}}, {D, {64, 64, 64}}, {D, {31, 257, 127}}, {F, {257, 768, 768}}, {END, {0}}};
/* {1, N, K}: matrix-vector, as each decoding step does; the last is GPT-2's logits. */
static const conf_point sweep_mv[] = {
    {Q, {1, 1, 1}},      {Q, {1, 7, 13}},      {Q, {1, 65, 33}},      {D, {1, 257, 127}},
    {D, {1, 3072, 768}}, {D, {1, 768, 3072}},  {F, {1, 50257, 768}},  {END, {0}}};
/* The same, without the logits: a [768, 50257] weight read by columns cannot be split into
 * contiguous ranges a device can bind, and GPT-2 stores it as [50257, 768] anyway. */
static const conf_point sweep_mv_kn[] = {
    {Q, {1, 1, 1}},      {Q, {1, 7, 13}},      {Q, {1, 65, 33}},      {D, {1, 257, 127}},
    {D, {1, 3072, 768}}, {D, {1, 768, 3072}},  {F, {1, 3072, 1024}},  {END, {0}}};
/* {1, N, K}: matrix-vector with B [K, N] in rows of whole 16-byte texels (N a multiple of 8: four
 * floats or eight 16-bit elements each), the texel path's matvec_texel.glsl: from one texel of
 * columns to GPT-2's 2304 and 3072, K tails of 1 to 3 rows past the last block of four, and K
 * smaller than the slices of k. */
static const conf_point sweep_mv_texel[] = {
    {Q, {1, 8, 1}},      {Q, {1, 8, 7}},      {Q, {1, 40, 13}},     {D, {1, 776, 7}},     {D, {1, 64, 769}},
    {D, {1, 768, 769}},  {D, {1, 2304, 768}}, {D, {1, 3072, 768}},  {D, {1, 768, 3072}},  {F, {1, 2304, 3073}},
    {END, {0}}};
/* {M, N, K}: a few rows, one per sequence of a batched decoding step (matvec_texel.glsl serves up
 * to 8 per fetch of B where K and N are whole texels; 16 takes the general shaders): GPT-2's
 * [768, 2304] and [3072, 768], SmolLM2's 576 and 1536, sizes dividing no tile or workgroup, K
 * shorter than the slices of k, and a K that is no whole vec4 (the general shaders). */
static const conf_point sweep_mv_rows[] = {
    {Q, {2, 8, 4}},       {Q, {3, 40, 12}},     {Q, {5, 8, 13}},       {Q, {8, 776, 20}},     {D, {2, 2304, 768}},
    {D, {3, 776, 772}},   {D, {5, 1536, 576}},  {D, {8, 576, 1536}},   {D, {8, 768, 3072}},   {D, {16, 2304, 768}},
    {D, {3, 1544, 7}},    {F, {8, 3072, 768}},  {F, {16, 1536, 576}},  {END, {0}}};
/* {M, N, K}: a few rows with weights [N, K] (Llama-family projections and tied heads), which
 * matvec_texelt.glsl serves up to 8 per fetch of B where K is whole texels (a multiple of 8
 * takes the 16-bit weights too): SmolLM2-135M's [1536, 576], [576, 1536] and [49152, 576] head,
 * Qwen2.5-0.5B's [4864, 896], N and K dividing no block, span or subgroup, K shorter than one
 * texel per lane, and a K that is no whole texel (the general shaders). */
static const conf_point sweep_mv_rows_nk[] = {
    {Q, {2, 8, 8}},        {Q, {3, 131, 40}},      {Q, {5, 17, 13}},      {Q, {8, 257, 24}},
    {D, {2, 1536, 576}},   {D, {3, 576, 1536}},    {D, {5, 1000, 584}},   {D, {8, 1536, 576}},
    {D, {2, 4864, 896}},   {D, {8, 49152, 576}},   {D, {3, 1021, 20}},    {F, {3, 49152, 576}},
    {F, {5, 4864, 896}},   {F, {8, 896, 4864}},    {F, {5, 576, 1536}},   {END, {0}}};
/* {V, C, N}: table [V, C], N ids. */
static const conf_point sweep_emb[] = {
    {Q, {1, 1, 1}},       {Q, {7, 13, 5}},   {Q, {31, 33, 17}}, {D, {257, 65, 31}},
    {D, {1024, 768, 64}}, {F, {50257, 768, 128}}, {END, {0}}};
/* {H, T, Dh}: heads, tokens, head size. */
static const conf_point sweep_attn[] = {
    {Q, {1, 1, 4}},   {Q, {2, 7, 8}},    {Q, {3, 17, 16}},    {D, {4, 33, 16}},
    {D, {12, 64, 64}}, {D, {2, 127, 32}}, {F, {12, 1024, 64}}, {END, {0}}};
/* {R, H, S, Dh}: a batch's decode step, R rows of one query each over caches of S rows (520: three
 * of a GPU's chunks of 256 keys, the rows' positions spread over them). */
static const conf_point sweep_attn_rows[] = {
    {Q, {1, 1, 3, 4}},      {Q, {2, 3, 17, 8}},     {Q, {5, 2, 33, 16}},     {Q, {3, 2, 520, 16}},
    {D, {8, 12, 64, 64}},   {D, {3, 25, 129, 64}},  {D, {7, 12, 1024, 64}},  {F, {16, 12, 1024, 64}}, {END, {0}}};
/* {Hkv, G, S, D}: a batch's decode step of 5 rows with grouped queries over caches of S rows, at
 * the heads of SmolLM2-135M (3 KV heads, groups of 3), Qwen2.5-0.5B (2, 7), TinyLlama-1.1B (4,
 * 8), Llama-3.2-1B (8, 4), Qwen3-0.6B (8, 2, heads of 128) and Mistral 7B (8, 4, 128); 600: three
 * of a GPU's chunks of 256 keys. */
static const conf_point sweep_gqa_rows[] = {
    {Q, {1, 1, 1, 4}},     {Q, {2, 3, 7, 8}},      {Q, {3, 3, 17, 64}},     {Q, {3, 3, 600, 64}},
    {D, {3, 3, 127, 64}},  {D, {2, 7, 64, 64}},    {D, {4, 8, 33, 64}},     {D, {8, 4, 31, 64}},
    {D, {8, 2, 17, 128}},  {F, {3, 3, 2048, 64}}, {F, {2, 7, 2048, 64}},  {F, {4, 8, 2048, 64}},   {F, {8, 4, 2048, 64}},
    {F, {8, 2, 2048, 128}}, {END, {0}}};
static const conf_point sweep_gqa_rows_window[] = {{Q, {2, 3, 17, 8}},    {Q, {2, 3, 600, 8}},
                                                   {D, {8, 4, 64, 128}}, {F, {8, 4, 2048, 128}}, {END, {0}}};
/* {B, T, C, H}: a transformer block (d_ff = 4 C). */
static const conf_point sweep_block[] = {
    {Q, {1, 1, 64, 4}}, {Q, {2, 10, 64, 4}}, {D, {2, 17, 64, 4}}, {D, {1, 64, 64, 4}},
    {F, {4, 128, 64, 4}}, {END, {0}}};
static const conf_point sweep_block_gpt2[] = {{D, {1, 16, 768, 12}}, {F, {1, 256, 768, 12}}, {END, {0}}};
/* {T, n_layer, n_embd, n_head}: whole models with GPT-2's vocabulary; GPT-2 124M at T = 1024 with --full. */
static const conf_point sweep_model[] = {{Q, {16, 1, 64, 4}}, {D, {64, 2, 768, 12}}, {F, {1024, 12, 768, 12}}, {END, {0}}};
/* The single variants (f16 alone, [out, in] alone) below T = 1024: at T = 1024 f32 [in, out] and
 * f16 [out, in] together cover both, and each whole-model case there is ~20 s of the full level. */
static const conf_point sweep_model_variant[] = {{Q, {16, 1, 64, 4}}, {D, {64, 2, 768, 12}}, {END, {0}}};
/* {rows, n_layer, n_embd, n_head}: a batch context's decode step over caches of 1024 positions. */
static const conf_point sweep_batched[] = {{Q, {3, 1, 64, 4}}, {D, {4, 2, 768, 12}}, {F, {8, 12, 768, 12}}, {END, {0}}};

/* ---- GPT-2's own shapes ------------------------------------------------------------------------
 * Exactly what GPT-2 124M (C = 768, 12 heads) and GPT-2 XL (C = 1600, 25 heads), both with heads
 * of 64, give each op at T = 1, 64, 480, 512 and 1024 tokens.  A software device once failed
 * from T = 480 on where every smaller shape passed, so the sizes users run are tested as they
 * are.  The default level has GPT-2 124M at T <= 512 and GPT-2 XL at T <= 64; --full adds
 * T = 1024, GPT-2 XL's long prompts and the logits beyond T = 64. */
#define XL 1600
#define GPT2_POINTS(N_OF, K_OF)                                                                                 \
    {D, {1, N_OF(768), K_OF(768)}}, {D, {64, N_OF(768), K_OF(768)}}, {D, {480, N_OF(768), K_OF(768)}},           \
    {D, {512, N_OF(768), K_OF(768)}}, {F, {1024, N_OF(768), K_OF(768)}}, {D, {1, N_OF(XL), K_OF(XL)}},            \
    {D, {64, N_OF(XL), K_OF(XL)}}, {F, {480, N_OF(XL), K_OF(XL)}}, {F, {512, N_OF(XL), K_OF(XL)}},              \
    {F, {1024, N_OF(XL), K_OF(XL)}}, {END, {0}}
#define WIDTH(c) (c)
#define QKV(c) (3 * (c))
#define MLP(c) (4 * (c))
#define VOCAB(c) 50257
/* {T, C, 0}: rows of the residual stream; {T, 4C, 0}: the MLP's hidden rows. */
static const conf_point sweep_gpt2_rows[] = {GPT2_POINTS(WIDTH, VOCAB)};
static const conf_point sweep_gpt2_mlp_rows[] = {GPT2_POINTS(MLP, VOCAB)};
/* {M = T, N, K}: the four layer products (x @ W + b, W [K, N] as GPT-2's Conv1D stores it). */
static const conf_point sweep_gpt2_qkv[] = {GPT2_POINTS(QKV, WIDTH)};
static const conf_point sweep_gpt2_proj[] = {GPT2_POINTS(WIDTH, WIDTH)};
static const conf_point sweep_gpt2_fc[] = {GPT2_POINTS(MLP, WIDTH)};
static const conf_point sweep_gpt2_mlp_proj[] = {GPT2_POINTS(WIDTH, MLP)};
/* {T, V, C}: the tied head, x @ wte^T. */
static const conf_point sweep_gpt2_logits[] = {
    {D, {1, 50257, 768}}, {D, {64, 50257, 768}}, {F, {480, 50257, 768}}, {F, {512, 50257, 768}},
    {F, {1024, 50257, 768}}, {D, {1, 50257, XL}}, {F, {64, 50257, XL}}, {F, {480, 50257, XL}},
    {F, {512, 50257, XL}}, {F, {1024, 50257, XL}}, {END, {0}}};
/* {H, Tq, Tk}: attention scores.  Tq = Tk: a prompt from position 0; Tk = 1024: GPT-2's cache,
 * one decoded token (Tq = 1) or a prompt after earlier tokens. */
static const conf_point sweep_gpt2_scores[] = {
    {D, {12, 1, 1}},      {D, {12, 64, 64}},    {D, {12, 480, 480}}, {Q, {12, 512, 512}}, {F, {12, 1024, 1024}},
    {D, {25, 1, 1}},      {D, {25, 64, 64}},    {F, {25, 480, 480}}, {F, {25, 512, 512}}, {F, {25, 1024, 1024}},
    {D, {12, 1, 1024}},   {D, {25, 1, 1024}},   {D, {12, 64, 1024}}, {F, {12, 1000, 1024}}, {F, {25, 512, 1024}},
    {END, {0}}};
/* {H, T, 64}: heads of a T-token prompt (for the decode case: T cached keys, one query). */
static const conf_point sweep_gpt2_heads[] = {
    {D, {12, 1, 64}},  {D, {12, 64, 64}}, {D, {12, 480, 64}}, {D, {12, 512, 64}}, {F, {12, 1024, 64}},
    {D, {25, 1, 64}},  {D, {25, 64, 64}}, {F, {25, 480, 64}}, {F, {25, 512, 64}}, {F, {25, 1024, 64}},
    {END, {0}}};
/* {H, T, 64}: fused attention at the head counts of GPT-2 124M, medium, large and XL (12, 16, 20,
 * 25; heads of 64 in all four): a T-token prompt, or T keys of a 1024-row cache written. */
#define ATTN_POINTS(H, big)                                                                                   \
    {D, {H, 1, 64}}, {D, {H, 7, 64}}, {D, {H, 64, 64}}, {big, {H, 480, 64}}, {big, {H, 512, 64}}, {F, {H, 1024, 64}}
static const conf_point sweep_gpt2_attn[] = {ATTN_POINTS(12, D), ATTN_POINTS(16, D), ATTN_POINTS(20, F),
                                             ATTN_POINTS(25, F), {END, {0}}};
/* {V, C, N}: token and position tables, N ids. */
static const conf_point sweep_gpt2_emb[] = {
    {D, {50257, 768, 64}}, {D, {1024, 768, 512}}, {F, {50257, 768, 1024}}, {F, {50257, XL, 1024}},
    {D, {1024, XL, 64}}, {END, {0}}};

/* ---- Llama-family shapes -----------------------------------------------------------------------
 * The models the Llama ops serve: SmolLM2-135M (C 576, 9 heads over 3 KV heads of 64, MLP 1536),
 * Qwen2.5-0.5B (896, 14 over 2 of 64, 4864), TinyLlama-1.1B (2048, 32 over 4 of 64, 5632),
 * Llama-3.2-1B (2048, 32 over 8 of 64, 8192), Qwen3-0.6B (1024, 16 over 8 of 128, 3072),
 * Mistral-7B (4096, 32 over 8 of 128, 14336), at
 * T = 1 (decode), short prompts and (--full) T = 2048. */
/* {T, C}: rows of the residual stream for rms_norm. */
static const conf_point sweep_llama_rows[] = {
    {Q, {1, 1}},     {Q, {3, 7}},      {Q, {13, 31}},    {D, {1, 576}},     {D, {7, 896}},   {D, {64, 1024}},
    {D, {17, 2048}}, {D, {5, 2053}},   {D, {3, 4096}},   {F, {2048, 576}}, {F, {2048, 896}}, {F, {512, 2048}}, {END, {0}}};
/* {T, H, D}: per-head rows for Qwen3's q_norm / k_norm, and heads for rope (token-major [T, H D]
 * projections viewed as [H, T, D]; 15, 18 and 48: the H + 2 Hkv heads of SmolLM2-135M's,
 * Qwen2.5-0.5B's and TinyLlama's or Llama-3.2-1B's q/k/v projection). */
static const conf_point sweep_llama_heads[] = {
    {Q, {1, 1, 2}},    {Q, {3, 5, 8}},     {Q, {13, 3, 6}},    {D, {1, 9, 64}},    {D, {17, 9, 64}},
    {D, {31, 14, 64}}, {D, {7, 32, 64}},   {D, {64, 16, 128}}, {D, {1, 8, 128}},   {D, {5, 32, 128}},
    {D, {1, 15, 64}},  {D, {1, 48, 64}},   {F, {2048, 9, 64}}, {F, {2048, 18, 64}},
    {F, {2048, 16, 128}}, {F, {2048, 32, 64}}, {END, {0}}};
/* {T, I, C}: the gated MLP's up projection x [T, C] @ W^T (W [I, C]) times silu(gate [T, I]). */
static const conf_point sweep_llama_mlp[] = {
    {Q, {1, 1, 1}},       {Q, {3, 7, 13}},      {Q, {17, 33, 65}},     {D, {1, 1536, 576}},  {D, {7, 1536, 576}},
    {D, {1, 4864, 896}},  {D, {64, 4864, 896}}, {D, {1, 5632, 2048}},  {D, {1, 3072, 1024}}, {D, {31, 3072, 1024}},
    {F, {1, 8192, 2048}}, {F, {2048, 1536, 576}}, {F, {512, 8192, 2048}}, {END, {0}}};
/* {Hkv, G, T, D}: grouped-query attention, G query heads over each of Hkv key/value heads. */
static const conf_point sweep_llama_gqa[] = {
    {Q, {1, 1, 1, 4}},   {Q, {2, 3, 7, 8}},    {Q, {3, 3, 17, 64}},  {D, {2, 7, 33, 64}},  {D, {8, 4, 64, 64}},
    {D, {4, 8, 31, 64}}, {D, {8, 2, 64, 128}}, {D, {3, 3, 127, 64}}, {D, {8, 4, 17, 128}}, {F, {3, 3, 2048, 64}}, {F, {8, 2, 2048, 128}},
    {F, {2, 7, 2048, 64}}, {END, {0}}};
/* {Hkv, G, T, D} at the 1B models' 32 query heads of 64 over a prompt of 2048: TinyLlama-1.1B (4
 * KV heads, groups of 8) and Llama-3.2-1B (8, groups of 4); the prompt only (the decode, the cached
 * prompt and the window at these group sizes are in sweep_llama_gqa at shorter T). */
static const conf_point sweep_llama_gqa_1b[] = {{D, {4, 8, 1, 64}}, {F, {4, 8, 2048, 64}}, {F, {8, 4, 2048, 64}},
                                                {END, {0}}};
/* {Hkv, G, T, D} for a decode step against a 2048-row cache, at position T - 1 (gqa_decode) or
 * within a window of T keys (gqa_decode_window): where a GPU splits the keys into chunks of 256
 * over its workgroups (vulkan/record.c), a position just past a chunk's end, at one, a window
 * starting inside a chunk, the whole cache; the heads of every supported model's decode. */
static const conf_point sweep_gqa_decode_chunks[] = {
    {Q, {3, 3, 257, 64}},  {Q, {1, 1, 512, 4}},   {Q, {2, 7, 300, 64}},  {Q, {8, 2, 2048, 128}},
    {D, {4, 8, 1537, 64}}, {D, {8, 4, 2048, 64}}, {D, {1, 3, 1000, 8}}, {D, {8, 4, 700, 128}}, {END, {0}}};
/* {Hkv, G, T, D}: Mistral 7B's 32 query heads of 128 over 8 KV heads, windowed. */
static const conf_point sweep_mistral_window[] = {{D, {8, 4, 64, 128}}, {F, {8, 4, 2048, 128}}, {END, {0}}};

/* ---- element-wise ---------------------------------------------------------------------------- */

static vkg_tensor in2(conf_build *b, int64_t r, int64_t c, conf_fill fill) { return conf_input(b, 2, S(r, c), fill); }

/* x [R, C] op y, y of the given shape; both drawn in this order (never inside one call, whose
 * arguments C evaluates in no fixed order). */
static void binary(conf_build *b, const int64_t *d, int is_add, int ndim, const int64_t *y_shape, conf_fill fill) {
    vkg_tensor x = in2(b, d[0], d[1], fill);
    vkg_tensor y = conf_input(b, ndim, y_shape, fill);
    conf_output(b, is_add ? vkg_add(b->g, x, y) : vkg_mul(b->g, x, y));
}
static void add_same(conf_build *b, const int64_t *d) { binary(b, d, 1, 2, S(d[0], d[1]), CONF_FILL_NORMAL); }
static void add_row(conf_build *b, const int64_t *d) { binary(b, d, 1, 1, S(d[1]), CONF_FILL_NORMAL); }
static void add_column(conf_build *b, const int64_t *d) { binary(b, d, 1, 2, S(d[0], 1), CONF_FILL_NORMAL); }
static void add_4d(conf_build *b, const int64_t *d) {
    vkg_tensor x = conf_input(b, 4, S(2, 1, d[0], d[1]), CONF_FILL_NORMAL);
    conf_output(b, vkg_add(b->g, x, conf_input(b, 3, S(3, d[0], 1), CONF_FILL_NORMAL)));
}
static void add_transposed(conf_build *b, const int64_t *d) {
    vkg_tensor xt = vkg_transpose(b->g, in2(b, d[1], d[0], CONF_FILL_NORMAL), 0, 1);
    conf_output(b, vkg_add(b->g, xt, in2(b, d[0], d[1], CONF_FILL_NORMAL)));
}
static void add_special(conf_build *b, const int64_t *d) { binary(b, d, 1, 2, S(d[0], d[1]), CONF_FILL_SPECIAL); }
static void mul_same(conf_build *b, const int64_t *d) { binary(b, d, 0, 2, S(d[0], d[1]), CONF_FILL_NORMAL); }
static void mul_row(conf_build *b, const int64_t *d) { binary(b, d, 0, 1, S(d[1]), CONF_FILL_NORMAL); }
static void mul_special(conf_build *b, const int64_t *d) { binary(b, d, 0, 2, S(d[0], d[1]), CONF_FILL_SPECIAL); }
static void scale_plain(conf_build *b, const int64_t *d) {
    conf_output(b, vkg_scale(b->g, in2(b, d[0], d[1], CONF_FILL_NORMAL), 0.3f));
}
static void scale_transposed(conf_build *b, const int64_t *d) {
    conf_output(b, vkg_scale(b->g, vkg_transpose(b->g, in2(b, d[1], d[0], CONF_FILL_NORMAL), 0, 1), -1.7f));
}
/* Every activation of params/unary_ops.def (a loop over its VKG_ACTIVATION rows, so a new one
 * cannot go untested) over x [R, C] of N(0, 1), of N(0, 25) (the tails, where a gate saturates)
 * and with infinities and NaNs (the limits). */
#define ACTIVATION_CASES(act)                                                                           \
    static void act##_plain(conf_build *b, const int64_t *d) {                                          \
        conf_output(b, vkg_##act(b->g, in2(b, d[0], d[1], CONF_FILL_NORMAL)));                          \
    }                                                                                                   \
    static void act##_wide(conf_build *b, const int64_t *d) {                                           \
        conf_output(b, vkg_##act(b->g, in2(b, d[0], d[1], CONF_FILL_WIDE)));                            \
    }                                                                                                   \
    static void act##_special(conf_build *b, const int64_t *d) {                                        \
        conf_output(b, vkg_##act(b->g, in2(b, d[0], d[1], CONF_FILL_SPECIAL)));                         \
    }
#define VKG_ACTIVATION(NAME, name, code, epilogue) ACTIVATION_CASES(name)
#include "params/unary_ops.def"

static void swiglu_plain(conf_build *b, const int64_t *d) {
    vkg_tensor gate = in2(b, d[0], d[1], CONF_FILL_WIDE);
    conf_output(b, vkg_swiglu(b->g, gate, in2(b, d[0], d[1], CONF_FILL_NORMAL)));
}
static void swiglu_special(conf_build *b, const int64_t *d) {
    vkg_tensor gate = in2(b, d[0], d[1], CONF_FILL_SPECIAL);
    conf_output(b, vkg_swiglu(b->g, gate, in2(b, d[0], d[1], CONF_FILL_SPECIAL)));
}

/* ---- masks and softmax: d = {H, Tq, Tk} ------------------------------------------------------ */

static vkg_tensor scores(conf_build *b, const int64_t *d, conf_fill fill) {
    return conf_input(b, 3, S(d[0], d[1], d[2]), fill);
}
static int32_t cached(const int64_t *d) { return (int32_t)(d[2] - d[1]); }

static void mask_causal(conf_build *b, const int64_t *d) {
    conf_output(b, vkg_mask_causal(b->g, scores(b, d, CONF_FILL_NORMAL), cached(d), VKG_NONE));
}
static void mask_causal_index(conf_build *b, const int64_t *d) {
    vkg_tensor x = scores(b, d, CONF_FILL_NORMAL);
    conf_output(b, vkg_mask_causal(b->g, x, -1, conf_index(b, cached(d) + 1)));
}
static void mask_bool(conf_build *b, const int64_t *d) {
    vkg_tensor x = scores(b, d, CONF_FILL_NORMAL);
    conf_output(b, vkg_mask(b->g, x, in2(b, d[1], d[2], CONF_FILL_KEEP), VKG_MASK_BOOL));
}
static void mask_additive(conf_build *b, const int64_t *d) {
    vkg_tensor x = scores(b, d, CONF_FILL_NORMAL);
    conf_output(b, vkg_mask(b->g, x, in2(b, d[1], d[2], CONF_FILL_ADDITIVE), VKG_MASK_ADDITIVE));
}

/* A sliding window of Tk / 3 + 1 positions (Mistral's sliding_window), after a cached prefix. */
static uint32_t window_of(const int64_t *d) { return (uint32_t)(d[2] / 3 + 1); }
static void mask_window(conf_build *b, const int64_t *d) {
    vkg_tensor x = scores(b, d, CONF_FILL_NORMAL);
    conf_output(b, vkg_mask_causal_window(b->g, x, -1, conf_index(b, cached(d) + 1), window_of(d)));
}
static void softmax_scale_window(conf_build *b, const int64_t *d) {
    vkg_tensor x = vkg_scale(b->g, scores(b, d, CONF_FILL_WIDE), 0.125f);
    conf_output(b, vkg_softmax(b->g, vkg_mask_causal_window(b->g, x, 0, conf_index(b, cached(d)), window_of(d))));
}

static void softmax_rows(conf_build *b, const int64_t *d) {
    conf_output(b, vkg_softmax(b->g, in2(b, d[0], d[1], CONF_FILL_NORMAL)));
}
static void softmax_wide(conf_build *b, const int64_t *d) {
    conf_output(b, vkg_softmax(b->g, in2(b, d[0], d[1], CONF_FILL_WIDE)));
}
static void softmax_scale_causal(conf_build *b, const int64_t *d) {
    vkg_tensor x = vkg_scale(b->g, scores(b, d, CONF_FILL_WIDE), 0.125f);
    conf_output(b, vkg_softmax(b->g, vkg_mask_causal(b->g, x, cached(d), VKG_NONE)));
}
static void softmax_causal_index(conf_build *b, const int64_t *d) {
    vkg_tensor x = vkg_scale(b->g, scores(b, d, CONF_FILL_WIDE), 0.125f);
    conf_output(b, vkg_softmax(b->g, vkg_mask_causal(b->g, x, 0, conf_index(b, cached(d)))));
}
/* Queries at positions index .. index + Tq - 1 of a cache of Tk rows only half written: the rows
 * past each query's position are blocked at run time. */
static void softmax_causal_partial(conf_build *b, const int64_t *d) {
    vkg_tensor x = vkg_scale(b->g, scores(b, d, CONF_FILL_WIDE), 0.125f);
    conf_output(b, vkg_softmax(b->g, vkg_mask_causal(b->g, x, 0, conf_index(b, cached(d) / 2))));
}
static void softmax_scale_bool(conf_build *b, const int64_t *d) {
    vkg_tensor x = vkg_scale(b->g, scores(b, d, CONF_FILL_WIDE), 0.125f);
    conf_output(b, vkg_softmax(b->g, vkg_mask(b->g, x, in2(b, d[1], d[2], CONF_FILL_KEEP), VKG_MASK_BOOL)));
}
static void softmax_scale_additive(conf_build *b, const int64_t *d) {
    vkg_tensor x = vkg_scale(b->g, scores(b, d, CONF_FILL_NORMAL), 0.5f);
    vkg_tensor m = conf_input(b, 3, S(1, d[1], d[2]), CONF_FILL_ADDITIVE);
    conf_output(b, vkg_softmax(b->g, vkg_mask(b->g, x, m, VKG_MASK_ADDITIVE)));
}
/* Rows 0 and 1 see nothing (j > i - 2 for every j): their weights must be zeros, not NaN. */
static void softmax_blocked_causal(conf_build *b, const int64_t *d) {
    conf_output(b, vkg_softmax(b->g, vkg_mask_causal(b->g, scores(b, d, CONF_FILL_NORMAL), -2, VKG_NONE)));
}
static void softmax_blocked_bool(conf_build *b, const int64_t *d) {
    vkg_tensor x = scores(b, d, CONF_FILL_NORMAL);
    conf_output(b, vkg_softmax(b->g, vkg_mask(b->g, x, in2(b, d[1], d[2], CONF_FILL_KEEP_NONE_ROW), VKG_MASK_BOOL)));
}
/* The masked scores are an output too, so nothing fuses: softmax reads -inf from memory. */
static void softmax_unfused(conf_build *b, const int64_t *d) {
    vkg_tensor m = vkg_mask_causal(b->g, vkg_scale(b->g, scores(b, d, CONF_FILL_NORMAL), 0.25f), cached(d), VKG_NONE);
    conf_output(b, m);
    conf_output(b, vkg_softmax(b->g, m));
}

/* ---- layernorm and embedding ----------------------------------------------------------------- */

static void layernorm_affine(conf_build *b, const int64_t *d) {
    vkg_tensor x = in2(b, d[0], d[1], CONF_FILL_NORMAL);
    vkg_tensor gamma = conf_constant(b, 1, S(d[1]), CONF_FILL_NORMAL), beta = conf_constant(b, 1, S(d[1]), CONF_FILL_NORMAL);
    conf_output(b, vkg_layernorm(b->g, x, gamma, beta, 1e-5f));
}
static void layernorm_plain(conf_build *b, const int64_t *d) {
    conf_output(b, vkg_layernorm(b->g, in2(b, d[0], d[1], CONF_FILL_NORMAL), VKG_NONE, VKG_NONE, 1e-5f));
}
static void layernorm_beta(conf_build *b, const int64_t *d) {
    vkg_tensor x = in2(b, d[0], d[1], CONF_FILL_NORMAL);
    conf_output(b, vkg_layernorm(b->g, x, VKG_NONE, conf_constant(b, 1, S(d[1]), CONF_FILL_NORMAL), 1e-5f));
}
static void layernorm_offset(conf_build *b, const int64_t *d) {
    vkg_tensor x = in2(b, d[0], d[1], CONF_FILL_OFFSET);
    conf_output(b, vkg_layernorm(b->g, x, conf_constant(b, 1, S(d[1]), CONF_FILL_NORMAL), VKG_NONE, 1e-5f));
}

/* rms_norm over rows [T, C] (with a weight, without, and with a large mean, which RMS does not
 * subtract), and over heads [T, H, D] with a weight [D] (Qwen3's q_norm). */
static void rms_norm_weight(conf_build *b, const int64_t *d) {
    vkg_tensor x = in2(b, d[0], d[1], CONF_FILL_NORMAL);
    conf_output(b, vkg_rms_norm(b->g, x, conf_constant(b, 1, S(d[1]), CONF_FILL_NORMAL), 1e-6f));
}
static void rms_norm_plain(conf_build *b, const int64_t *d) {
    conf_output(b, vkg_rms_norm(b->g, in2(b, d[0], d[1], CONF_FILL_NORMAL), VKG_NONE, 1e-5f));
}
static void rms_norm_offset(conf_build *b, const int64_t *d) {
    vkg_tensor x = in2(b, d[0], d[1], CONF_FILL_OFFSET);
    conf_output(b, vkg_rms_norm(b->g, x, conf_constant(b, 1, S(d[1]), CONF_FILL_NORMAL), 1e-6f));
}
static void rms_norm_heads(conf_build *b, const int64_t *d) {
    vkg_tensor x = vkg_reshape(b->g, in2(b, d[0], d[1] * d[2], CONF_FILL_NORMAL), 3, S(d[0], d[1], d[2]));
    conf_output(b, vkg_rms_norm(b->g, x, conf_constant(b, 1, S(d[2]), CONF_FILL_NORMAL), 1e-6f));
}

/* rope over heads viewed from a token-major projection [T, H D] as [H, T, D] (no copy), at a
 * static offset, at a runtime offset, and decoding at position 32767 of a 32768-row table. */
static vkg_tensor rope_heads(conf_build *b, const int64_t *d) {
    vkg_tensor x = vkg_reshape(b->g, in2(b, d[0], d[1] * d[2], CONF_FILL_NORMAL), 3, S(d[0], d[1], d[2]));
    return vkg_permute(b->g, x, (const int[]){1, 0, 2});
}
static void rope_prompt(conf_build *b, const int64_t *d) {
    vkg_tensor x = rope_heads(b, d);
    conf_output(b, vkg_rope(b->g, x, conf_constant(b, 2, S(d[0] + 5, d[2]), CONF_FILL_NORMAL), 3, VKG_NONE));
}
static void rope_runtime(conf_build *b, const int64_t *d) {
    vkg_tensor x = rope_heads(b, d), table = conf_constant(b, 2, S(2 * d[0] + 7, d[2]), CONF_FILL_NORMAL);
    conf_output(b, vkg_rope(b->g, x, table, 0, conf_index(b, (int32_t)d[0] + 7)));
}
/* q, k and v of one projection as heads [H, T, D], a third of them (the values) copied as they are */
static void rope_qkv(conf_build *b, const int64_t *d) {
    vkg_tensor x = rope_heads(b, d), table = conf_constant(b, 2, S(2 * d[0] + 7, d[2]), CONF_FILL_NORMAL);
    conf_output(b, vkg_rope_heads(b->g, x, table, 0, conf_index(b, (int32_t)d[0] + 7), VKG_NONE, d[1] - d[1] / 3));
}
/* the same with each row at a position of its own (the rows of several sequences), some of them
 * outside the table (NaN rows) */
static void rope_rows(conf_build *b, const int64_t *d, int out_of_range) {
    const int64_t P = 2 * d[0] + 7;
    vkg_tensor x = rope_heads(b, d), table = conf_constant(b, 2, S(P, d[2]), CONF_FILL_NORMAL);
    vkg_tensor positions = conf_ids(b, 1, S(d[0]), P, out_of_range);
    conf_output(b, vkg_rope_heads(b->g, x, table, 0, VKG_NONE, positions, d[1] - d[1] / 3));
}
static void rope_row_positions(conf_build *b, const int64_t *d) { rope_rows(b, d, 0); }
static void rope_row_positions_outside(conf_build *b, const int64_t *d) { rope_rows(b, d, 1); }
static void rope_far(conf_build *b, const int64_t *d) {
    vkg_tensor x = vkg_permute(b->g, conf_input(b, 3, S(1, d[1], d[2]), CONF_FILL_NORMAL), (const int[]){1, 0, 2});
    vkg_tensor table = conf_constant(b, 2, S(32768, d[2]), CONF_FILL_NORMAL);
    conf_output(b, vkg_rope(b->g, x, table, 0, conf_index(b, 32767)));
}

/* The cos/sin table of each rope type of models/rope.h (a loop over VKG_ROPE_TYPES, so a new
 * type cannot go untested), as the Llama family computes it (rope.c, in double), applied to heads
 * at a position past the original context, where linear and llama3 scaling differ from none:
 * default with Llama 2's theta, linear with factor 4, llama3 with Llama 3.2's factors, yarn as
 * Qwen's long-context setting is (theta 10^6, factor 4; the cos and sin scaled by 1.139), dynamic
 * with factor 2 (the default rotation inside the model's context). */
static void rope_type(conf_build *b, const int64_t *d, vkg_rope_type type) {
    vkg_rope_config c = {.type = type, .theta = 10000.0, .dim = d[2]};
    switch (type) {
    case VKG_ROPE_DEFAULT: break;
    case VKG_ROPE_LINEAR: c.factor = 4.0; break;
    case VKG_ROPE_LLAMA3:
        c.theta = 500000.0, c.factor = 32.0, c.low_freq_factor = 1.0, c.high_freq_factor = 4.0;
        c.original_max_position_embeddings = 8192.0;
        break;
    case VKG_ROPE_YARN: c.theta = 1000000.0, c.factor = 4.0, c.original_max_position_embeddings = 4096.0; break;
    case VKG_ROPE_DYNAMIC: c.factor = 2.0; break;
    case VKG_ROPE_TYPE_COUNT: break;
    }
    const int64_t half = d[2] / 2, positions = 9000 + d[0];
    double *inv_freq = malloc((size_t)half * sizeof *inv_freq);
    float *table = malloc((size_t)(positions * d[2]) * sizeof *table);
    double factor = 1.0;
    vkg_error err;
    if (!inv_freq || !table || vkg_rope_inv_freq(&c, inv_freq, &factor, &err) != VKG_OK) {
        free(inv_freq), free(table);
        b->out_of_memory = 1;
        return;
    }
    vkg_rope_fill_table(inv_freq, half, factor, positions, table);
    free(inv_freq);
    conf_defer(b, free, table);
    vkg_tensor x = rope_heads(b, d);
    vkg_tensor t = vkg_constant(b->g, "cos_sin", VKG_F32, 2, S(positions, d[2]), table);
    conf_output(b, vkg_rope(b->g, x, t, 0, conf_index(b, 9000)));
    snprintf(b->shape, sizeof b->shape, "%s: T=%lld H=%lld D=%lld at position 9000", vkg_rope_type_name(type),
             (long long)d[0], (long long)d[1], (long long)d[2]);
}
#define ROPE_TYPE_CASE(ENUM, name) \
    static void rope_type_##name(conf_build *b, const int64_t *d) { rope_type(b, d, VKG_ROPE_##ENUM); }
VKG_ROPE_TYPES(ROPE_TYPE_CASE)
#undef ROPE_TYPE_CASE

static void embedding_ids(conf_build *b, const int64_t *d) {
    vkg_tensor table = conf_constant(b, 2, S(d[0], d[1]), CONF_FILL_NORMAL);
    conf_output(b, vkg_embedding(b->g, table, conf_ids(b, 1, S(d[2]), d[0], 0)));
}
static void embedding_out_of_range(conf_build *b, const int64_t *d) {
    vkg_tensor table = conf_constant(b, 2, S(d[0], d[1]), CONF_FILL_NORMAL);
    conf_output(b, vkg_embedding(b->g, table, conf_ids(b, 2, S(2, d[2]), d[0], 1)));
}

/* ---- data movement --------------------------------------------------------------------------- */

static void copy_transpose(conf_build *b, const int64_t *d) {
    conf_output(b, vkg_copy(b->g, vkg_transpose(b->g, in2(b, d[0], d[1], CONF_FILL_NORMAL), 0, 1)));
}
static void copy_special(conf_build *b, const int64_t *d) {
    conf_output(b, vkg_copy(b->g, in2(b, d[0], d[1], CONF_FILL_SPECIAL)));
}
/* A permuted view as an output: the compiler must materialise it. */
static void view_permute(conf_build *b, const int64_t *d) {
    vkg_tensor x = conf_input(b, 4, S(2, d[0], 3, d[1]), CONF_FILL_NORMAL);
    conf_output(b, vkg_permute(b->g, x, (const int[]){2, 0, 3, 1}));
}
static void view_slice(conf_build *b, const int64_t *d) {
    int64_t start = d[1] / 3;
    vkg_tensor x = vkg_slice(b->g, in2(b, d[0], d[1], CONF_FILL_NORMAL), -1, start, d[1] - start);
    conf_output(b, vkg_relu(b->g, x));
}
/* Heads split out of a [R, 3 * C] projection, as attention reads q, k and v. */
static void view_heads(conf_build *b, const int64_t *d) {
    vkg_tensor qkv = in2(b, d[0], 3 * d[1], CONF_FILL_NORMAL);
    vkg_tensor k = vkg_reshape(b->g, vkg_slice(b->g, qkv, -1, d[1], d[1]), 3, S(d[0], d[1], 1));
    conf_output(b, vkg_copy(b->g, vkg_permute(b->g, k, (const int[]){1, 0, 2})));
}
static void write_state(conf_build *b, const int64_t *d) {
    vkg_tensor state = conf_state(b, 2, S(d[0] + 3, d[1]));
    vkg_tensor x = in2(b, d[0], d[1], CONF_FILL_NORMAL);
    conf_output(b, vkg_copy(b->g, vkg_write_at(b->g, state, x, 0, 1, conf_index(b, 2))));
}
/* One head-split part of a [T, 3C] projection: x[:, part C : (part + 1) C] as [H, T, Dh]. */
static vkg_tensor head_view(conf_build *b, vkg_tensor qkv, int part, int64_t h, int64_t t, int64_t dh) {
    vkg_tensor x = vkg_reshape(b->g, vkg_slice(b->g, qkv, -1, part * h * dh, h * dh), 3, S(t, h, dh));
    return vkg_permute(b->g, x, (const int[]){1, 0, 2});
}
/* A new [T, 3C] projection (C = H Dh) and its keys and values, columns [C, 3C), as [T, 2, H, Dh]
 * (a view) in *kv; its state `cache` [planes, H, S, Dh] made after it. */
static void projection_kv(conf_build *b, int64_t T, int64_t H, int64_t Dh, int64_t planes, int64_t Sk, vkg_tensor *kv,
                          vkg_tensor *cache) {
    const int64_t C = H * Dh;
    vkg_tensor qkv = in2(b, T, 3 * C, CONF_FILL_NORMAL);
    *cache = conf_state(b, 4, S(planes, H, Sk, Dh));
    *kv = vkg_reshape(b->g, vkg_slice(b->g, qkv, -1, C, 2 * C), 4, S(T, 2, H, Dh));
}
/* R runtime indices made one after another, a batch's rows at positions S - 1 down to 0, evenly
 * apart; returns the first. */
static vkg_tensor row_positions(conf_build *b, int64_t R, int64_t Sk) {
    const vkg_tensor first = conf_index(b, (int32_t)(Sk - 1));
    for (int64_t r = 1; r < R; r++) conf_index(b, (int32_t)(Sk - 1 - r * (Sk - 1) / (R - 1)));
    return first;
}
/* d = {H, T, Dh}: GPT-2's KV-cache write, the keys and values of a [T, 3C] projection (side by
 * side: [T, 2, H, Dh] viewed [2, H, T, Dh]) into rows pos .. pos + T - 1 of a [2, H, 1024, Dh]
 * state in one step, pos given at run time; or (slot) into slot 2 of a cache of 4 slots
 * [8, H, 1024, Dh] (vkg_write_at_block, a batch context's prefill): the other slots keep their
 * values. */
static void kv_cache_write_in(conf_build *b, const int64_t *d, int slot) {
    vkg_tensor kv, cache;
    projection_kv(b, d[1], d[0], d[2], slot ? 8 : 2, 1024, &kv, &cache);
    kv = vkg_permute(b->g, kv, (const int[]){1, 2, 0, 3});
    vkg_tensor index = conf_index(b, (int32_t)(1024 - d[1]) / 2);
    conf_output(b, vkg_copy(b->g, vkg_write_at_block(b->g, cache, kv, 2, 0, index, 0, slot ? 4 : 0)));
}
static void kv_cache_write(conf_build *b, const int64_t *d) { kv_cache_write_in(b, d, 0); }
static void kv_cache_write_slot(conf_build *b, const int64_t *d) { kv_cache_write_in(b, d, 1); }
/* A batch's decode step, d = {R, H, S, Dh}: the keys and values of R rows of a [R, 3C] projection
 * ([R, 2, H, Dh], a view) into a cache of R + 1 slots [2 (R + 1), H, S, Dh], row r into slot r at
 * its own position (from S - 1 down to 0), one step (vkg_write_rows): the last slot keeps its
 * values, as do the other positions. */
static void kv_cache_write_rows(conf_build *b, const int64_t *d) {
    const int64_t R = d[0];
    vkg_tensor kv, cache;
    projection_kv(b, R, d[1], d[3], 2 * (R + 1), d[2], &kv, &cache);
    conf_output(b, vkg_copy(b->g, vkg_write_rows(b->g, cache, kv, row_positions(b, R, d[2]), (int)R)));
}
/* A q/k/v projection's heads rotated, d = {Hkv, G, T, Dh} ([T, (G + 2) Hkv Dh] viewed [(G + 2) Hkv,
 * T, Dh], the values copied), with the keys and values written into a KV cache by the rotation's
 * own step (rope+write, params/rope.h): into slot 1 of 2 [4, Hkv, T + 5, Dh] at a runtime position
 * (a prompt or a decode step); with rows, d = {Hkv, G, S, Dh} and 5 rows (a batch's decode step),
 * each rotated at a position of its own and written into its slot of a cache of 6 [12, Hkv, S, Dh]
 * at its own index.  The rotation and the cache are both compared. */
static void rope_into_cache(conf_build *b, const int64_t *d, int rows) {
    const int64_t Hkv = d[0], H = d[0] * d[1], T = rows ? 5 : d[2], Dh = d[3], Sk = rows ? d[2] : d[2] + 5;
    vkg_tensor x = rope_heads(b, S(T, H + 2 * Hkv, Dh)), table = conf_constant(b, 2, S(Sk, Dh), CONF_FILL_NORMAL);
    vkg_tensor cache = conf_state(b, 4, S(rows ? 12 : 4, Hkv, Sk, Dh));
    vkg_tensor heads, kv;
    if (rows) {
        heads = vkg_rope_heads(b->g, x, table, 0, VKG_NONE, conf_ids(b, 1, S(T), Sk, 0), H + Hkv);
        kv = vkg_reshape(b->g, vkg_slice(b->g, heads, 0, H, 2 * Hkv), 4, S(2, Hkv, T, Dh));
        kv = vkg_permute(b->g, kv, (const int[]){2, 0, 1, 3});
        cache = vkg_write_rows(b->g, cache, kv, row_positions(b, T, Sk), (int)T);
    } else {
        const vkg_tensor pos = conf_index(b, 3);
        heads = vkg_rope_heads(b->g, x, table, 0, pos, VKG_NONE, H + Hkv);
        kv = vkg_reshape(b->g, vkg_slice(b->g, heads, 0, H, 2 * Hkv), 4, S(2, Hkv, T, Dh));
        cache = vkg_write_at_block(b->g, cache, kv, 2, 0, pos, 0, 2);
    }
    conf_output(b, heads);
    conf_output(b, vkg_copy(b->g, cache));
}
static void rope_cache(conf_build *b, const int64_t *d) { rope_into_cache(b, d, 0); }
static void rope_cache_rows(conf_build *b, const int64_t *d) { rope_into_cache(b, d, 1); }
/* d = {H, T, Dh}: the heads merged back, [H, T, Dh] -> [T, H Dh], as attention's output is. */
static void merge_heads(conf_build *b, const int64_t *d) {
    vkg_tensor x = conf_input(b, 3, S(d[0], d[1], d[2]), CONF_FILL_NORMAL);
    x = vkg_permute(b->g, x, (const int[]){1, 0, 2});
    conf_output(b, vkg_copy(b->g, vkg_reshape(b->g, x, 2, S(d[1], d[0] * d[2]))));
}
static void concat_rows(conf_build *b, const int64_t *d) {
    vkg_tensor x = in2(b, d[0], d[1], CONF_FILL_NORMAL);
    conf_output(b, vkg_concat(b->g, x, in2(b, 3, d[1], CONF_FILL_NORMAL), 0));
}
static void concat_columns(conf_build *b, const int64_t *d) {
    vkg_tensor x = in2(b, d[0], d[1], CONF_FILL_NORMAL);
    conf_output(b, vkg_concat(b->g, x, in2(b, d[0], 5, CONF_FILL_SPECIAL), -1));
}
static void concat_views(conf_build *b, const int64_t *d) {
    vkg_tensor xt = vkg_transpose(b->g, in2(b, d[1], d[0], CONF_FILL_NORMAL), 0, 1);
    conf_output(b, vkg_concat(b->g, xt, in2(b, d[0], d[1], CONF_FILL_NORMAL), 1));
}

/* ---- matmul: d = {M, N, K} ------------------------------------------------------------------- */

static vkg_tensor weight(conf_build *b, int64_t k, int64_t n) { return conf_constant(b, 2, S(k, n), CONF_FILL_NORMAL); }
static vkg_tensor bias(conf_build *b, int64_t n) { return conf_constant(b, 1, S(n), CONF_FILL_NORMAL); }

static void mm_plain(conf_build *b, const int64_t *d) {
    vkg_tensor a = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    conf_output(b, vkg_matmul(b->g, a, in2(b, d[2], d[1], CONF_FILL_NORMAL), VKG_NONE, 0));
}
static void mm_transpose_b(conf_build *b, const int64_t *d) {
    vkg_tensor a = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    conf_output(b, vkg_matmul(b->g, a, weight(b, d[1], d[2]), VKG_NONE, VKG_TRANSPOSE_B));
}
static void mm_transpose_a(conf_build *b, const int64_t *d) {
    vkg_tensor a = in2(b, d[2], d[0], CONF_FILL_NORMAL);
    conf_output(b, vkg_matmul(b->g, a, in2(b, d[2], d[1], CONF_FILL_NORMAL), VKG_NONE, VKG_TRANSPOSE_A));
}
static void mm_transpose_ab(conf_build *b, const int64_t *d) {
    vkg_tensor a = in2(b, d[2], d[0], CONF_FILL_NORMAL);
    conf_output(b, vkg_matmul(b->g, a, in2(b, d[1], d[2], CONF_FILL_NORMAL), VKG_NONE, VKG_TRANSPOSE_A | VKG_TRANSPOSE_B));
}
static void mm_batched(conf_build *b, const int64_t *d) {
    vkg_tensor a = conf_input(b, 4, S(2, 1, d[0], d[2]), CONF_FILL_NORMAL);
    conf_output(b, vkg_matmul(b->g, a, conf_input(b, 3, S(3, d[2], d[1]), CONF_FILL_NORMAL), VKG_NONE, 0));
}
/* x [.., M, K] @ a weight [K, N] (or [N, K] with transpose_b) + bias [N]. */
static vkg_tensor linear(conf_build *b, vkg_tensor x, const int64_t *d, int transpose_b) {
    vkg_tensor w = transpose_b ? weight(b, d[1], d[2]) : weight(b, d[2], d[1]);
    vkg_tensor bs = bias(b, d[1]);
    return vkg_matmul(b->g, x, w, bs, transpose_b ? VKG_TRANSPOSE_B : 0);
}
static void mm_batched_weight(conf_build *b, const int64_t *d) {
    conf_output(b, linear(b, conf_input(b, 3, S(3, d[0], d[2]), CONF_FILL_NORMAL), d, 1));
}
static void mm_bias(conf_build *b, const int64_t *d) {
    conf_output(b, linear(b, in2(b, d[0], d[2], CONF_FILL_NORMAL), d, 0));
}
static void mm_add_bias(conf_build *b, const int64_t *d) {
    vkg_tensor a = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    vkg_tensor mm = vkg_matmul(b->g, a, weight(b, d[2], d[1]), VKG_NONE, 0);
    conf_output(b, vkg_add(b->g, mm, bias(b, d[1])));
}
/* x [M, K] @ w [K, N] + bias, then an activation, all fused into the matmul's epilogue: operands
 * of N(0, 1); or (extreme) x of N(0, 25), so the sums reach the gates' tails, and a bias with
 * infinities and NaNs, so whole columns go through the activation's limits. */
static void mm_bias_activation(conf_build *b, const int64_t *d, vkg_tensor (*act)(vkg_graph *, vkg_tensor),
                               int extreme) {
    vkg_tensor x = in2(b, d[0], d[2], extreme ? CONF_FILL_WIDE : CONF_FILL_NORMAL);
    vkg_tensor w = weight(b, d[2], d[1]);
    vkg_tensor bs = conf_constant(b, 1, S(d[1]), extreme ? CONF_FILL_SPECIAL : CONF_FILL_NORMAL);
    conf_output(b, act(b->g, vkg_matmul(b->g, x, w, bs, 0)));
}
#define FUSED_ACTIVATION_CASES(act)                                                                     \
    static void mm_bias_##act(conf_build *b, const int64_t *d) { mm_bias_activation(b, d, vkg_##act, 0); } \
    static void mm_bias_##act##_extreme(conf_build *b, const int64_t *d) {                              \
        mm_bias_activation(b, d, vkg_##act, 1);                                                         \
    }
/* ... and, with a residual added after it, the whole epilogue (bias, activation, residual). */
static void mm_bias_activation_residual(conf_build *b, const int64_t *d, vkg_tensor (*act)(vkg_graph *, vkg_tensor)) {
    vkg_tensor r = in2(b, d[0], d[1], CONF_FILL_NORMAL);
    vkg_tensor x = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    conf_output(b, vkg_add(b->g, act(b->g, linear(b, x, d, 0)), r));
}
#define VKG_ACTIVATION(NAME, name, code, epilogue)                                                      \
    FUSED_ACTIVATION_CASES(name)                                                                        \
    static void mm_bias_##name##_residual(conf_build *b, const int64_t *d) {                            \
        mm_bias_activation_residual(b, d, vkg_##name);                                                  \
    }
#include "params/unary_ops.def"
static void mm_bias_residual(conf_build *b, const int64_t *d) {
    vkg_tensor r = in2(b, d[0], d[1], CONF_FILL_NORMAL);
    vkg_tensor a = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    conf_output(b, vkg_add(b->g, r, linear(b, a, d, 1)));
}
static void mm_bias_residual_kn(conf_build *b, const int64_t *d) {
    vkg_tensor r = in2(b, d[0], d[1], CONF_FILL_NORMAL);
    vkg_tensor a = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    conf_output(b, vkg_add(b->g, r, linear(b, a, d, 0)));
}
static void mv_weights_nk(conf_build *b, const int64_t *d) {
    vkg_tensor x = in2(b, 1, d[2], CONF_FILL_NORMAL);
    conf_output(b, vkg_matmul(b->g, x, weight(b, d[1], d[2]), VKG_NONE, VKG_TRANSPOSE_B));
}
static void mv_weights_kn(conf_build *b, const int64_t *d) {
    conf_output(b, linear(b, in2(b, 1, d[2], CONF_FILL_NORMAL), d, 0));
}

/* d = {T, I, C}: silu(x Wg^T) * (x Wu^T), Llama's MLP before the down projection; the product is
 * the up projection's epilogue.  Also with the gate's sums in the tails and non-finite. */
static void mm_swiglu(conf_build *b, const int64_t *d, conf_fill gate_fill) {
    vkg_tensor x = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    vkg_tensor gate = in2(b, d[0], d[1], gate_fill);
    conf_output(b, vkg_swiglu(b->g, gate, vkg_matmul(b->g, x, weight(b, d[1], d[2]), VKG_NONE, VKG_TRANSPOSE_B)));
}
static void mm_swiglu_normal(conf_build *b, const int64_t *d) { mm_swiglu(b, d, CONF_FILL_WIDE); }
/* The up projection with a bias (Llama's mlp_bias), then the gate: bias and gate in one epilogue. */
static void mm_bias_swiglu(conf_build *b, const int64_t *d) {
    vkg_tensor x = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    vkg_tensor gate = in2(b, d[0], d[1], CONF_FILL_WIDE);
    conf_output(b, vkg_swiglu(b->g, gate, linear(b, x, d, 1)));
}
static void mm_swiglu_special(conf_build *b, const int64_t *d) { mm_swiglu(b, d, CONF_FILL_SPECIAL); }
/* Both projections from x, as vkg_layer_mlp builds them: the gate's matmul, then the up one
 * with swiglu in its epilogue. */
static void mm_gated_mlp(conf_build *b, const int64_t *d) {
    vkg_tensor x = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    vkg_tensor gate = vkg_matmul(b->g, x, weight(b, d[1], d[2]), VKG_NONE, VKG_TRANSPOSE_B);
    conf_output(b, vkg_swiglu(b->g, gate, vkg_matmul(b->g, x, weight(b, d[1], d[2]), VKG_NONE, VKG_TRANSPOSE_B)));
}

/* ---- 16-bit weights: matmul's B and embedding tables of f16 or bf16 --------------------------- */

/* d = {M, N, K}: x [M, K] @ w^T for w [N, K] (the tied head's layout); x @ w + bias for w [K, N]
 * (GPT-2's Conv1D layers), also with gelu or a residual in the epilogue; and x [3, M, K] over one
 * [N, K] weight.  w is 16-bit, everything else f32. */
static void mm16_nk(conf_build *b, const int64_t *d, vkg_dtype dt) {
    vkg_tensor a = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    conf_output(b, vkg_matmul(b->g, a, conf_constant16(b, 2, S(d[1], d[2]), CONF_FILL_NORMAL, dt), VKG_NONE,
                              VKG_TRANSPOSE_B));
}
static vkg_tensor linear16(conf_build *b, vkg_tensor x, const int64_t *d, vkg_dtype dt) {
    vkg_tensor w = conf_constant16(b, 2, S(d[2], d[1]), CONF_FILL_NORMAL, dt);
    return vkg_matmul(b->g, x, w, bias(b, d[1]), 0);
}
static void mm16_kn_bias(conf_build *b, const int64_t *d, vkg_dtype dt) {
    conf_output(b, linear16(b, in2(b, d[0], d[2], CONF_FILL_NORMAL), d, dt));
}
static void mm16_kn_bias_gelu(conf_build *b, const int64_t *d, vkg_dtype dt) {
    conf_output(b, vkg_gelu(b->g, linear16(b, in2(b, d[0], d[2], CONF_FILL_NORMAL), d, dt)));
}
static void mm16_kn_bias_residual(conf_build *b, const int64_t *d, vkg_dtype dt) {
    vkg_tensor r = in2(b, d[0], d[1], CONF_FILL_NORMAL);
    vkg_tensor a = in2(b, d[0], d[2], CONF_FILL_NORMAL);
    conf_output(b, vkg_add(b->g, r, linear16(b, a, d, dt)));
}
static void mm16_batched(conf_build *b, const int64_t *d, vkg_dtype dt) {
    vkg_tensor x = conf_input(b, 3, S(3, d[0], d[2]), CONF_FILL_NORMAL);
    vkg_tensor w = conf_constant16(b, 2, S(d[1], d[2]), CONF_FILL_NORMAL, dt);
    conf_output(b, vkg_matmul(b->g, x, w, bias(b, d[1]), VKG_TRANSPOSE_B));
}
/* d = {V, C, N}: N ids into a 16-bit [V, C] table (every fifth out of range with `bad`). */
static void emb16(conf_build *b, const int64_t *d, vkg_dtype dt, int bad) {
    vkg_tensor table = conf_constant16(b, 2, S(d[0], d[1]), CONF_FILL_NORMAL, dt);
    conf_output(b, vkg_embedding(b->g, table, conf_ids(b, bad ? 2 : 1, bad ? S(2, d[2]) : S(d[2]), d[0], bad)));
}
#define CASES_16BIT(tag, dt)                                                                                       \
    static void mm_##tag##_nk(conf_build *b, const int64_t *d) { mm16_nk(b, d, dt); }                            \
    static void mm_##tag##_kn_bias(conf_build *b, const int64_t *d) { mm16_kn_bias(b, d, dt); }                  \
    static void mm_##tag##_kn_bias_gelu(conf_build *b, const int64_t *d) { mm16_kn_bias_gelu(b, d, dt); }        \
    static void mm_##tag##_kn_bias_residual(conf_build *b, const int64_t *d) { mm16_kn_bias_residual(b, d, dt); } \
    static void mm_##tag##_batched(conf_build *b, const int64_t *d) { mm16_batched(b, d, dt); }                  \
    static void emb_##tag(conf_build *b, const int64_t *d) { emb16(b, d, dt, 0); }                                \
    static void emb_##tag##_out_of_range(conf_build *b, const int64_t *d) { emb16(b, d, dt, 1); }
CASES_16BIT(f16, VKG_F16)
CASES_16BIT(bf16, VKG_BF16)

/* ---- attention: d = {H, T, Dh} --------------------------------------------------------------- */

static vkg_tensor attend(conf_build *b, vkg_tensor q, vkg_tensor k, vkg_tensor v, int64_t dh, vkg_tensor mask,
                         int32_t causal_offset, vkg_tensor index) {
    vkg_tensor s = vkg_scale(b->g, vkg_matmul(b->g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1.0f / sqrtf((float)dh));
    s = mask != VKG_NONE ? vkg_mask(b->g, s, mask, VKG_MASK_BOOL) : vkg_mask_causal(b->g, s, causal_offset, index);
    return vkg_matmul(b->g, vkg_softmax(b->g, s), v, VKG_NONE, 0);
}
static vkg_tensor heads(conf_build *b, int64_t h, int64_t t, int64_t dh) {
    return conf_input(b, 3, S(h, t, dh), CONF_FILL_NORMAL);
}
static void attn_causal(conf_build *b, const int64_t *d) {
    vkg_tensor q = heads(b, d[0], d[1], d[2]), k = heads(b, d[0], d[1], d[2]), v = heads(b, d[0], d[1], d[2]);
    conf_output(b, attend(b, q, k, v, d[2], VKG_NONE, 0, VKG_NONE));
}
static void attn_bool(conf_build *b, const int64_t *d) {
    vkg_tensor q = heads(b, d[0], d[1], d[2]), k = heads(b, d[0], d[1], d[2]), v = heads(b, d[0], d[1], d[2]);
    conf_output(b, attend(b, q, k, v, d[2], in2(b, d[1], d[1], CONF_FILL_KEEP), 0, VKG_NONE));
}
/* One new query against T cached keys, the offset given at run time, as decoding does. */
static void attn_decode(conf_build *b, const int64_t *d) {
    vkg_tensor q = heads(b, d[0], 1, d[2]), k = heads(b, d[0], d[1], d[2]), v = heads(b, d[0], d[1], d[2]);
    conf_output(b, attend(b, q, k, v, d[2], VKG_NONE, 0, conf_index(b, (int32_t)d[1] - 1)));
}
/* GPT-2's decode step: one query's projection, attending over a 1024-row cache of which T rows
 * are written (index T - 1), d = {H, T, Dh}. */
static void attn_decode_cache(conf_build *b, const int64_t *d) {
    vkg_tensor q = heads(b, d[0], 1, d[2]), k = heads(b, d[0], 1024, d[2]), v = heads(b, d[0], 1024, d[2]);
    conf_output(b, attend(b, q, k, v, d[2], VKG_NONE, 0, conf_index(b, (int32_t)d[1] - 1)));
}
/* A T-token prompt after 1024 - T cached tokens: T queries against the whole 1024-row cache, the
 * offset given at run time, d = {H, T, Dh}. */
static void attn_prefill_cache(conf_build *b, const int64_t *d) {
    vkg_tensor q = heads(b, d[0], d[1], d[2]), k = heads(b, d[0], 1024, d[2]), v = heads(b, d[0], 1024, d[2]);
    conf_output(b, attend(b, q, k, v, d[2], VKG_NONE, 0, conf_index(b, (int32_t)(1024 - d[1]))));
}
/* The probabilities an output too (as `vkgraph attention` asks): nothing fuses into attention. */
static void attn_with_probs(conf_build *b, const int64_t *d) {
    vkg_tensor q = heads(b, d[0], d[1], d[2]), k = heads(b, d[0], d[1], d[2]), v = heads(b, d[0], d[1], d[2]);
    vkg_tensor s = vkg_scale(b->g, vkg_matmul(b->g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1.0f / sqrtf((float)d[2]));
    vkg_tensor probs = vkg_softmax(b->g, vkg_mask_causal(b->g, s, 0, VKG_NONE));
    conf_output(b, vkg_matmul(b->g, probs, v, VKG_NONE, 0));
    conf_output(b, probs);
}
/* A batch's decode step without groups, d = {R, H, S, Dh}: row r's query [H, 1, Dh] against its
 * own cache [H, S, Dh] at its own position (rows from S - 1 down to 0), one attention step for
 * every row; with the probabilities an output too, softmax and the mask unfused. */
static vkg_tensor attn_rows_probs(conf_build *b, const int64_t *d) {
    const int64_t R = d[0], H = d[1], Sk = d[2], Dh = d[3];
    vkg_tensor q = conf_input(b, 4, S(R, H, 1, Dh), CONF_FILL_NORMAL);
    vkg_tensor k = conf_input(b, 4, S(R, H, Sk, Dh), CONF_FILL_NORMAL), v = conf_input(b, 4, S(R, H, Sk, Dh), CONF_FILL_NORMAL);
    const vkg_tensor first = row_positions(b, R, Sk);
    vkg_tensor s = vkg_scale(b->g, vkg_matmul(b->g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1.0f / sqrtf((float)Dh));
    vkg_tensor probs = vkg_softmax(b->g, vkg_mask_causal_rows(b->g, s, 0, first, (int)R, 0, 0));
    conf_output(b, vkg_matmul(b->g, probs, v, VKG_NONE, 0));
    return probs;
}
static void attn_rows(conf_build *b, const int64_t *d) { attn_rows_probs(b, d); }
static void attn_rows_unfused(conf_build *b, const int64_t *d) { conf_output(b, attn_rows_probs(b, d)); }
/* The same with grouped queries, d = {Hkv, G, S, Dh}, 5 rows: row r's G query heads of each
 * key/value head as rows at its one position (from S - 1 down to 0), the queries [R, Hkv, G, Dh]
 * viewed from the rotation's [H, R, Dh], each row's keys and values the halves of its slot
 * [2 Hkv, S, Dh] (the cache's layout); optionally within a sliding window of S / 2 + 1. */
static vkg_tensor gqa_rows_probs(conf_build *b, const int64_t *d, uint32_t window) {
    const int64_t R = 5, Hkv = d[0], G = d[1], Sk = d[2], Dh = d[3];
    vkg_tensor q = conf_input(b, 3, S(Hkv * G, R, Dh), CONF_FILL_NORMAL);
    q = vkg_reshape(b->g, vkg_permute(b->g, q, (const int[]){1, 0, 2}), 4, S(R, Hkv, G, Dh));
    vkg_tensor slots = conf_input(b, 4, S(R, 2 * Hkv, Sk, Dh), CONF_FILL_NORMAL);
    vkg_tensor k = vkg_slice(b->g, slots, 1, 0, Hkv), v = vkg_slice(b->g, slots, 1, Hkv, Hkv);
    const vkg_tensor first = row_positions(b, R, Sk);
    vkg_tensor s = vkg_scale(b->g, vkg_matmul(b->g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1.0f / sqrtf((float)Dh));
    vkg_tensor probs = vkg_softmax(b->g, vkg_mask_causal_rows(b->g, s, 0, first, (int)R, window, 1));
    conf_output(b, vkg_matmul(b->g, probs, v, VKG_NONE, 0));
    return probs;
}
static void gqa_rows(conf_build *b, const int64_t *d) { gqa_rows_probs(b, d, 0); }
static void gqa_rows_unfused(conf_build *b, const int64_t *d) { conf_output(b, gqa_rows_probs(b, d, 0)); }
static void gqa_rows_window(conf_build *b, const int64_t *d) { gqa_rows_probs(b, d, (uint32_t)(d[2] / 2 + 1)); }
/* q, k, v as strided views of one [T, 3 C] projection, heads split without copies. */
static void attn_views(conf_build *b, const int64_t *d) {
    int64_t h = d[0], t = d[1], dh = d[2], c = h * dh;
    vkg_tensor qkv = in2(b, t, 3 * c, CONF_FILL_NORMAL);
    vkg_tensor o = attend(b, head_view(b, qkv, 0, h, t, dh), head_view(b, qkv, 1, h, t, dh),
                          head_view(b, qkv, 2, h, t, dh), dh, VKG_NONE, 0, VKG_NONE);
    conf_output(b, vkg_reshape(b->g, vkg_permute(b->g, o, (const int[]){1, 0, 2}), 2, S(t, c)));
}

/* Grouped-query attention as vkg_layer_attention lays it out, d = {Hkv, G, T, D}: queries
 * [Hkv, G, T, D] viewed from a [T, Hkv G D] projection, keys and values [Hkv, 1, S, D]
 * broadcast over each group.  Causal over the prompt; decoding one token against a 2048-row
 * cache (T rows written); a prompt after a cache; and within a sliding window of T / 2 + 1. */
static vkg_tensor gqa_queries(conf_build *b, const int64_t *d, int64_t t) {
    vkg_tensor x = vkg_reshape(b->g, in2(b, t, d[0] * d[1] * d[3], CONF_FILL_NORMAL), 4, S(t, d[0], d[1], d[3]));
    return vkg_permute(b->g, x, (const int[]){1, 2, 0, 3});
}
static vkg_tensor gqa_kv(conf_build *b, const int64_t *d, int64_t s) {
    return conf_input(b, 4, S(d[0], 1, s, d[3]), CONF_FILL_NORMAL);
}
static vkg_tensor gqa_attend(conf_build *b, vkg_tensor q, vkg_tensor k, vkg_tensor v, int64_t dh, vkg_tensor index,
                             uint32_t window) {
    vkg_tensor s = vkg_scale(b->g, vkg_matmul(b->g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1.0f / sqrtf((float)dh));
    s = vkg_mask_causal_window(b->g, s, 0, index, window);
    return vkg_matmul(b->g, vkg_softmax(b->g, s), v, VKG_NONE, 0);
}
static void gqa_prompt(conf_build *b, const int64_t *d) {
    vkg_tensor q = gqa_queries(b, d, d[2]), k = gqa_kv(b, d, d[2]), v = gqa_kv(b, d, d[2]);
    conf_output(b, gqa_attend(b, q, k, v, d[3], VKG_NONE, 0));
}
static void gqa_decode(conf_build *b, const int64_t *d) {
    vkg_tensor q = gqa_queries(b, d, 1), k = gqa_kv(b, d, 2048), v = gqa_kv(b, d, 2048);
    conf_output(b, gqa_attend(b, q, k, v, d[3], conf_index(b, (int32_t)d[2] - 1), 0));
}
static void gqa_prefill_cache(conf_build *b, const int64_t *d) {
    vkg_tensor q = gqa_queries(b, d, d[2]), k = gqa_kv(b, d, 2048), v = gqa_kv(b, d, 2048);
    conf_output(b, gqa_attend(b, q, k, v, d[3], conf_index(b, (int32_t)(2048 - d[2]) / 2), 0));
}
static void gqa_window(conf_build *b, const int64_t *d) {
    vkg_tensor q = gqa_queries(b, d, d[2]), k = gqa_kv(b, d, d[2]), v = gqa_kv(b, d, d[2]);
    conf_output(b, gqa_attend(b, q, k, v, d[3], VKG_NONE, (uint32_t)(d[2] / 2 + 1)));
}
/* Mistral's window in a prompt: queries at 0 .. T - 1, each seeing its last T / 4 keys. */
static void gqa_window_quarter(conf_build *b, const int64_t *d) {
    vkg_tensor q = gqa_queries(b, d, d[2]), k = gqa_kv(b, d, d[2]), v = gqa_kv(b, d, d[2]);
    conf_output(b, gqa_attend(b, q, k, v, d[3], VKG_NONE, (uint32_t)(d[2] / 4)));
}
static void gqa_decode_window(conf_build *b, const int64_t *d) {
    vkg_tensor q = gqa_queries(b, d, 1), k = gqa_kv(b, d, 2048), v = gqa_kv(b, d, 2048);
    conf_output(b, gqa_attend(b, q, k, v, d[3], conf_index(b, (int32_t)(2048 - d[2])), (uint32_t)d[2]));
}

/* ---- the transformer block: d = {B, T, C, H} ------------------------------------------------- */

static void free_block_weights(void *w) {
    vkg_block_weights_free(w);
    free(w);
}

static void block(conf_build *b, const int64_t *d, int causal, int with_probs) {
    vkg_block_config cfg = {.d_model = (int)d[2], .n_heads = (int)d[3], .d_ff = 4 * (int)d[2], .causal = causal};
    vkg_block_weights *w = calloc(1, sizeof *w);
    if (!w || vkg_block_weights_init(w, &cfg, vkg_rng_next(b->rng), NULL) != VKG_OK) {
        free(w);
        b->out_of_memory = 1;
        return;
    }
    conf_defer(b, free_block_weights, w);
    vkg_tensor probs = VKG_NONE;
    vkg_tensor x = conf_input(b, 3, S(d[0], d[1], d[2]), CONF_FILL_NORMAL);
    conf_output(b, vkg_block_build(b->g, x, &cfg, w, "block", with_probs ? &probs : NULL));
    if (with_probs) conf_output(b, probs);
    snprintf(b->shape, sizeof b->shape, "B=%lld T=%lld d_model=%d heads=%d d_ff=%d", (long long)d[0],
             (long long)d[1], cfg.d_model, cfg.n_heads, cfg.d_ff);
}
static void block_lesson(conf_build *b, const int64_t *d) { block(b, d, 0, 1); }
static void block_causal(conf_build *b, const int64_t *d) { block(b, d, 1, 0); }

/* ---- the list -------------------------------------------------------------------------------- */

static const conf_case_def cases[] = {
    {"add", "same shape", EW, add_same, sweep_rc},
    {"add", "broadcast row [C]", EW, add_row, sweep_rc},
    {"add", "broadcast column [R, 1]", EW, add_column, sweep_rc},
    {"add", "4-d broadcast both sides", EW, add_4d, sweep_rc},
    {"add", "transposed operand", EW, add_transposed, sweep_rc},
    {"add", "inf/nan inputs", EW, add_special, sweep_rc},
    {"add", "GPT-2 residual [T, C]", EW, add_same, sweep_gpt2_rows},
    {"mul", "same shape", EW, mul_same, sweep_rc},
    {"mul", "broadcast row [C]", EW, mul_row, sweep_rc},
    {"mul", "inf/nan inputs", EW, mul_special, sweep_rc},
    {"scale", "0.3 x", EW, scale_plain, sweep_rc},
    {"scale", "transposed input", EW, scale_transposed, sweep_rc},
#define VKG_ACTIVATION(NAME, name, code, epilogue)                                                      \
    {#name, "N(0, 1)", EW, name##_plain, sweep_rc},                                                     \
    {#name, "N(0, 25): the tails", EW, name##_wide, sweep_rc},                                          \
    {#name, "inf/nan inputs", EW, name##_special, sweep_rc},
#include "params/unary_ops.def"
    {"gelu", "GPT-2 MLP rows [T, 4C], N(0, 25)", EW, gelu_wide, sweep_gpt2_mlp_rows},
    {"gelu_erf", "GPT-2 MLP rows [T, 4C], N(0, 25)", EW, gelu_erf_wide, sweep_gpt2_mlp_rows},
    {"mask", "causal, cached prefix", EW, mask_causal, sweep_scores},
    {"mask", "causal, runtime offset", EW, mask_causal_index, sweep_scores},
    {"mask", "boolean, broadcast heads", EW, mask_bool, sweep_scores},
    {"mask", "additive with -inf", EW, mask_additive, sweep_scores},
    {"mask", "causal sliding window", EW, mask_window, sweep_scores},
    {"softmax", "rows", EW, softmax_rows, sweep_rc},
    {"softmax", "rows of N(0, 25)", EW, softmax_wide, sweep_rc},
    {"softmax", "fused scale+causal", EW, softmax_scale_causal, sweep_scores},
    {"softmax", "fused scale+causal, runtime", EW, softmax_causal_index, sweep_scores},
    {"softmax", "fused scale+bool mask", EW, softmax_scale_bool, sweep_scores},
    {"softmax", "fused scale+additive mask", EW, softmax_scale_additive, sweep_scores},
    {"softmax", "fused scale+window, runtime", EW, softmax_scale_window, sweep_scores},
    {"softmax", "fully masked rows (causal)", EW, softmax_blocked_causal, sweep_scores},
    {"softmax", "fully masked rows (bool)", EW, softmax_blocked_bool, sweep_scores},
    {"softmax", "unfused, -inf inputs", EW, softmax_unfused, sweep_scores},
    {"softmax", "many rows", EW, softmax_rows, sweep_many_rows},
    {"softmax", "GPT-2 scale+causal", EW, softmax_scale_causal, sweep_gpt2_scores},
    {"softmax", "GPT-2 scale+causal, runtime", EW, softmax_causal_index, sweep_gpt2_scores},
    {"softmax", "GPT-2 cache half written", EW, softmax_causal_partial, sweep_gpt2_scores},
    {"layernorm", "gamma and beta", EW, layernorm_affine, sweep_rc},
    {"layernorm", "no affine", EW, layernorm_plain, sweep_rc},
    {"layernorm", "beta only", EW, layernorm_beta, sweep_rc},
    {"layernorm", "mean 20, gamma only", EW, layernorm_offset, sweep_rc},
    {"layernorm", "GPT-2 ln [T, C]", EW, layernorm_affine, sweep_gpt2_rows},
    {"layernorm", "many rows", EW, layernorm_affine, sweep_many_rows},
    {"rms_norm", "weight", EW, rms_norm_weight, sweep_rc},
    {"rms_norm", "no weight", EW, rms_norm_plain, sweep_rc},
    {"rms_norm", "mean 20, weight", EW, rms_norm_offset, sweep_rc},
    {"rms_norm", "Llama rows [T, C]", EW, rms_norm_weight, sweep_llama_rows},
    {"rms_norm", "per head [T, H, D] (q/k norm)", EW, rms_norm_heads, sweep_llama_heads},
    {"rms_norm", "many rows", EW, rms_norm_weight, sweep_many_rows},
    {"rope", "heads of [T, H D], offset 3", EW, rope_prompt, sweep_llama_heads},
    {"rope", "runtime offset", EW, rope_runtime, sweep_llama_heads},
    {"rope", "q, k and v heads, the values copied", EW, rope_qkv, sweep_llama_heads},
    {"rope", "a position per row", EW, rope_row_positions, sweep_llama_heads},
    {"rope", "a position per row, some outside the table", EW, rope_row_positions_outside, sweep_llama_heads},
    {"rope", "decode at position 32767", EW, rope_far, sweep_llama_heads},
#define ROPE_TYPE_ROW(ENUM, name) {"rope", #name " table (rope.c)", EW, rope_type_##name, sweep_llama_heads},
    VKG_ROPE_TYPES(ROPE_TYPE_ROW)
#undef ROPE_TYPE_ROW
    {"swiglu", "silu(gate) * up", EW, swiglu_plain, sweep_rc},
    {"swiglu", "inf/nan inputs", EW, swiglu_special, sweep_rc},
    {"embedding", "ids [N]", EW, embedding_ids, sweep_emb},
    {"embedding", "ids [2, N], out of range", EW, embedding_out_of_range, sweep_emb},
    {"embedding", "GPT-2 wte / wpe", EW, embedding_ids, sweep_gpt2_emb},
    {"embedding", "f16 table, ids [N]", EMB16, emb_f16, sweep_emb},
    {"embedding", "bf16 table, ids [N]", EMB16, emb_bf16, sweep_emb},
    {"embedding", "f16 table, out of range", EMB16, emb_f16_out_of_range, sweep_emb},
    {"embedding", "bf16 table, out of range", EMB16, emb_bf16_out_of_range, sweep_emb},
    {"embedding", "GPT-2 wte / wpe, f16", EMB16, emb_f16, sweep_gpt2_emb},
    {"embedding", "GPT-2 wte / wpe, bf16", EMB16, emb_bf16, sweep_gpt2_emb},
    {"copy", "transpose", EW, copy_transpose, sweep_rc},
    {"copy", "inf/nan values", EW, copy_special, sweep_rc},
    {"copy", "permuted view as output", EW, view_permute, sweep_rc},
    {"copy", "slice of the last axis", EW, view_slice, sweep_rc},
    {"copy", "heads split from [R, 3C]", EW, view_heads, sweep_rc},
    {"copy", "write_at into a state", EW, write_state, sweep_rc},
    {"copy", "GPT-2 KV-cache write", EW, kv_cache_write, sweep_gpt2_heads},
    {"copy", "GPT-2 heads merged", EW, merge_heads, sweep_gpt2_heads},
    {"concat", "rows (axis 0)", EW, concat_rows, sweep_rc},
    {"concat", "columns, inf/nan part", EW, concat_columns, sweep_rc},
    {"concat", "of transposed views", EW, concat_views, sweep_rc},
    {"matmul", "plain", RED, mm_plain, sweep_mnk},
    {"matmul", "transpose B (weights [N, K])", RED, mm_transpose_b, sweep_mnk},
    {"matmul", "transpose A", RED, mm_transpose_a, sweep_mnk_small},
    {"matmul", "transpose A and B", RED, mm_transpose_ab, sweep_mnk_small},
    {"matmul", "batched, both broadcast", RED, mm_batched, sweep_mnk_small},
    {"matmul", "batched over a 2-d weight", RED, mm_batched_weight, sweep_mnk_small},
    {"matmul", "bias", RED, mm_bias, sweep_mnk_layer},
    {"matmul", "add fused as bias", RED, mm_add_bias, sweep_mnk_layer},
/* each activation of params/unary_ops.def after a matmul: fused into its epilogue where the row
 * says so (epilogue 1), else a step of its own */
#define EPILOGUE_1 "fused bias+"
#define EPILOGUE_0 "bias, then "
#define VKG_ACTIVATION(NAME, name, code, epilogue)                                                      \
    {"matmul", EPILOGUE_##epilogue #name, RED, mm_bias_##name, sweep_mnk_layer},                         \
    {"matmul", "bias+" #name ": tails, inf/nan", RED, mm_bias_##name##_extreme, sweep_mnk_extreme},      \
    {"matmul", EPILOGUE_##epilogue #name "+residual", RED, mm_bias_##name##_residual, sweep_mnk_small},
#include "params/unary_ops.def"
#undef EPILOGUE_1
#undef EPILOGUE_0
    {"matmul", "fused bias+residual", RED, mm_bias_residual, sweep_mnk_layer},
    {"matmul", "matrix-vector, weights [N, K]", RED, mv_weights_nk, sweep_mv},
    {"matmul", "matrix-vector, weights [K, N]", RED, mv_weights_kn, sweep_mv_kn},
    {"matmul", "GPT-2 c_attn (+bias)", RED, mm_bias, sweep_gpt2_qkv},
    {"matmul", "GPT-2 attn.c_proj (+bias+res)", RED, mm_bias_residual_kn, sweep_gpt2_proj},
    {"matmul", "GPT-2 c_fc (+bias+gelu)", RED, mm_bias_gelu, sweep_gpt2_fc},
    {"matmul", "GPT-2 mlp.c_proj (+bias+res)", RED, mm_bias_residual_kn, sweep_gpt2_mlp_proj},
    {"matmul", "GPT-2 logits (x @ wte^T)", RED, mm_transpose_b, sweep_gpt2_logits},
    {"matmul", "fused swiglu (up's epilogue)", RED, mm_swiglu_normal, sweep_llama_mlp},
    {"matmul", "fused swiglu, gate inf/nan", RED, mm_swiglu_special, sweep_mnk_extreme},
    {"matmul", "fused bias+swiglu (mlp_bias)", RED, mm_bias_swiglu, sweep_mnk_small},
    {"matmul", "Llama gate and up projections", RED, mm_gated_mlp, sweep_llama_mlp},
    {"matmul", "B f16 [N, K], transposed", MM16, mm_f16_nk, sweep_mnk},
    {"matmul", "B bf16 [N, K], transposed", MM16, mm_bf16_nk, sweep_mnk},
    {"matmul", "B f16 [K, N] + bias", MM16, mm_f16_kn_bias, sweep_mnk_layer},
    {"matmul", "B bf16 [K, N] + bias", MM16, mm_bf16_kn_bias, sweep_mnk_layer},
    {"matmul", "B f16, batched over it", MM16, mm_f16_batched, sweep_mnk_small},
    {"matmul", "B bf16, batched over it", MM16, mm_bf16_batched, sweep_mnk_small},
    {"matmul", "matrix-vector, B f16 [N, K]", MM16, mm_f16_nk, sweep_mv},
    {"matmul", "matrix-vector, B bf16 [N, K]", MM16, mm_bf16_nk, sweep_mv},
    {"matmul", "matrix-vector, B f16 [K, N]", MM16, mm_f16_kn_bias, sweep_mv_kn},
    {"matmul", "matrix-vector, B bf16 [K, N]", MM16, mm_bf16_kn_bias, sweep_mv_kn},
    {"matmul", "matrix-vector, whole texels [K, N]", RED, mm_bias, sweep_mv_texel},
    {"matmul", "matrix-vector texels, +gelu", RED, mm_bias_gelu, sweep_mv_texel},
    {"matmul", "matrix-vector texels, +residual", RED, mm_bias_residual_kn, sweep_mv_texel},
    {"matmul", "matrix-vector texels, B f16", MM16, mm_f16_kn_bias, sweep_mv_texel},
    {"matmul", "matrix-vector texels, B bf16", MM16, mm_bf16_kn_bias, sweep_mv_texel},
    {"matmul", "mv texels, B f16 +gelu", MM16, mm_f16_kn_bias_gelu, sweep_mv_texel},
    {"matmul", "mv texels, B bf16 +residual", MM16, mm_bf16_kn_bias_residual, sweep_mv_texel},
    {"matmul", "few rows, weights [K, N]", RED, mm_bias, sweep_mv_rows},
    {"matmul", "few rows, [K, N] +residual", RED, mm_bias_residual_kn, sweep_mv_rows},
    {"matmul", "few rows, weights [N, K]", RED, mm_transpose_b, sweep_mv_rows},
    {"matmul", "few rows, B f16 [K, N]", MM16, mm_f16_kn_bias, sweep_mv_rows},
    {"matmul", "few rows, B bf16 [K, N]", MM16, mm_bf16_kn_bias, sweep_mv_rows},
    {"matmul", "few rows, B f16 [N, K]", MM16, mm_f16_nk, sweep_mv_rows},
    {"matmul", "few rows, Llama weights [N, K]", RED, mm_transpose_b, sweep_mv_rows_nk},
    {"matmul", "few rows, Llama B f16 [N, K]", MM16, mm_f16_nk, sweep_mv_rows_nk},
    {"matmul", "few rows, Llama B bf16 [N, K]", MM16, mm_bf16_nk, sweep_mv_rows_nk},
    {"matmul", "GPT-2 c_attn, B f16", MM16, mm_f16_kn_bias, sweep_gpt2_qkv},
    {"matmul", "GPT-2 attn.c_proj+res, B f16", MM16, mm_f16_kn_bias_residual, sweep_gpt2_proj},
    {"matmul", "GPT-2 c_fc+gelu, B f16", MM16, mm_f16_kn_bias_gelu, sweep_gpt2_fc},
    {"matmul", "GPT-2 mlp.c_proj+res, B bf16", MM16, mm_bf16_kn_bias_residual, sweep_gpt2_mlp_proj},
    {"matmul", "GPT-2 c_fc+gelu, B bf16", MM16, mm_bf16_kn_bias_gelu, sweep_gpt2_fc},
    {"matmul", "GPT-2 logits, wte f16", MM16, mm_f16_nk, sweep_gpt2_logits},
    {"matmul", "GPT-2 logits, wte bf16", MM16, mm_bf16_nk, sweep_gpt2_logits},
    {"attention", "causal", RED, attn_causal, sweep_attn},
    {"attention", "boolean mask", RED, attn_bool, sweep_attn},
    {"attention", "decode: 1 query, runtime offset", RED, attn_decode, sweep_attn},
    {"attention", "q, k, v as views of [T, 3C]", RED, attn_views, sweep_attn},
    {"attention", "GPT-2 q, k, v views of [T, 3C]", RED, attn_views, sweep_gpt2_heads},
    {"attention", "GPT-2 decode, 1024-row cache", RED, attn_decode_cache, sweep_gpt2_heads},
    {"attention", "fused, GPT-2 heads 12-25 x 64", VKG_CONFORMANCE_NMSE_ATTENTION, attn_views, sweep_gpt2_attn},
    {"attention", "fused, decode vs 1024-row cache", VKG_CONFORMANCE_NMSE_ATTENTION, attn_decode_cache,
     sweep_gpt2_attn},
    {"attention", "fused, prompt after a cache", VKG_CONFORMANCE_NMSE_ATTENTION, attn_prefill_cache, sweep_gpt2_attn},
    {"attention", "probs requested: unfused", RED, attn_with_probs, sweep_gpt2_heads},
    {"attention", "a batch's rows, each at its position", VKG_CONFORMANCE_NMSE_ATTENTION, attn_rows, sweep_attn_rows},
    {"attention", "a batch's rows, probs requested: unfused", RED, attn_rows_unfused, sweep_attn_rows},
    {"attention", "GQA prompt", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_prompt, sweep_llama_gqa},
    {"attention", "GQA decode vs 2048-row cache", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_decode, sweep_llama_gqa},
    {"attention", "GQA prompt after a cache", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_prefill_cache, sweep_llama_gqa},
    {"attention", "GQA sliding window", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_window, sweep_llama_gqa},
    {"attention", "GQA decode, window", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_decode_window, sweep_llama_gqa},
    {"attention", "GQA decode at chunk edges", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_decode, sweep_gqa_decode_chunks},
    {"attention", "GQA decode, window at chunk edges", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_decode_window,
     sweep_gqa_decode_chunks},
    {"attention", "GQA prompt, 1B models' heads", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_prompt, sweep_llama_gqa_1b},
    {"attention", "GQA window, Mistral 7B heads", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_window_quarter,
     sweep_mistral_window},
    {"block", "lesson block + attention probs", RED, block_lesson, sweep_block},
    {"block", "causal", RED, block_causal, sweep_block},
    {"block", "GPT-2 sized", RED, block_causal, sweep_block_gpt2},
    {"model", "GPT-2, logits at every position", MODEL, conf_gpt2_model, sweep_model},
    {"model", "GPT-2, f16 weights", MODEL16, conf_gpt2_model_f16, sweep_model_variant},
    {"model", "GPT-2, projections [out, in]", MODEL, conf_gpt2_model_transposed, sweep_model_variant},
    {"model", "GPT-2, f16, projections [out, in]", MODEL16, conf_gpt2_model_f16_transposed, sweep_model},
    {"model", "GPT-2, batched decode", MODEL, conf_gpt2_batched_decode, sweep_batched},
    {"copy", "GPT-2 KV-cache write into slot 2 of 4", EW, kv_cache_write_slot, sweep_gpt2_heads},
    {"copy", "a batch's rows into their slots", EW, kv_cache_write_rows, sweep_attn_rows},
    {"attention", "GQA, a batch's rows at their positions", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_rows, sweep_gqa_rows},
    {"attention", "GQA, a batch's rows, probs: unfused", RED, gqa_rows_unfused, sweep_gqa_rows},
    {"attention", "GQA, a batch's rows, window", VKG_CONFORMANCE_NMSE_ATTENTION, gqa_rows_window, sweep_gqa_rows_window},
    {"rope", "q, k, v; keys, values into the cache", EW, rope_cache, sweep_llama_gqa},
    {"rope", "a batch's rows, each into its slot", EW, rope_cache_rows, sweep_gqa_rows},
};

int vkg_conformance_case_count(void) { return (int)(sizeof cases / sizeof cases[0]); }

const conf_case_def *vkg_conformance_case_def(int i) {
    return i >= 0 && i < vkg_conformance_case_count() ? &cases[i] : NULL;
}
