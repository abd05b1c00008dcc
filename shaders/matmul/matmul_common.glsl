// matmul_common.glsl — bindings, push constants and the epilogue shared by every
// matmul kernel. C = act(alpha * op(A) * op(B) + beta * C + bias), per batch.
// A is stored M x K (row pitch lda) or, transposed, K x M; B is K x N (pitch
// ldb) or, transposed, N x K. C is packed M x N per batch. Inputs are fp16 or,
// with IN_BF16, bfloat16; C is fp32, fp16 (OUT_F16) or bfloat16 (OUT_BF16).
// The same buffer is declared at one binding with several element types: 16-byte
// vectors for aligned bulk loads, 16-bit scalars for tails.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
#include "../common/bf16.glsl"
#include "../elementwise/activation.glsl"  // ACT_*, activate()

#ifdef OUT_F16
#define OUT_T float16_t
#elif defined(OUT_BF16)
#define OUT_T uint16_t   // bfloat16 bits: written and read through store_c / load_c
#else
#define OUT_T float
#endif

// The words every product kernel reads (push_matmul.glsl, from shaders/layouts.py) and
// the FLAG_* and EPI_* bits: pushed, or in matmul_gemv_persist.comp a member's words from
// its row of the run's table (persist_member fills p; EPI and ACT with them).
#include "push_matmul.glsl"
#ifdef PERSIST
const bool TRANS_A = false, TRANS_B = true, BATCHED = false;
#endif

// The epilogue and layouts are specialization constants (EPI, ACT, TRANS_A, TRANS_B,
// BATCHED), declared with every family's constants in the generated
// spec_<family>.glsl that each shader includes before this file, so that a plain
// product compiles to the same code as before they existed.
#ifndef PERSIST
const bool EPILOGUE = EPI != 0u || ACT != 0u;
#endif

#ifdef PERSIST
// A member's buffers: slots pm + PERSIST_* of the PERSIST array. What a member reads that
// an earlier one may have written goes around L1 (coherent): a workgroup's L1 could
// hold the line from before.
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent readonly buffer A16 { uint16_t v[]; } ps_a16[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent readonly buffer A64 { uvec2 v[]; } ps_a64[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent readonly buffer AH { float16_t v[]; } ps_ah[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) readonly buffer B16 { uint16_t v[]; } ps_b16[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) readonly buffer B128 { uvec4 v[]; } ps_b128[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) readonly buffer BH { float16_t v[]; } ps_bh[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent buffer C { OUT_T v[]; } ps_c[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) readonly buffer Bias { float v[]; } ps_bias[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent readonly buffer A128 { uvec4 v[]; } ps_a128[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent buffer KV16 { uint16_t v[]; } ps_kv16[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent buffer Work { float v[]; } ps_work[PERSIST_MEMBERS * PERSIST_ROLES];
uint pm;  // the member's first slot in PERSIST
#define a16 ps_a16[pm + PERSIST_A].v
#define a64 ps_a64[pm + PERSIST_A].v
#define ah ps_ah[pm + PERSIST_A].v
#define b16 ps_b16[pm + PERSIST_B].v
#define b128 ps_b128[pm + PERSIST_B].v
#define bh ps_bh[pm + PERSIST_B].v
#define C_AT(i) ps_c[pm + PERSIST_C].v[i]
#define C_IN_AT(i) ps_c[pm + PERSIST_C].v[i]
#define BIAS_AT(i) ps_bias[pm + PERSIST_BIAS].v[i]
#else
layout(binding = BINDING_A) readonly buffer A16 { uint16_t a16[]; };
layout(binding = BINDING_A) readonly buffer A128 { uvec4 a128[]; };
layout(binding = BINDING_A) readonly buffer AH { float16_t ah[]; };
layout(binding = BINDING_B) readonly buffer B16 { uint16_t b16[]; };
layout(binding = BINDING_B) readonly buffer B128 { uvec4 b128[]; };
layout(binding = BINDING_B) readonly buffer BH { float16_t bh[]; };
layout(binding = BINDING_C) writeonly buffer C { OUT_T c[]; };
layout(binding = BINDING_C) readonly buffer CIn { OUT_T c_in[]; };   // beta * C reads it first
layout(binding = BINDING_C) writeonly buffer C128 { uvec4 c128[]; };    // 8 halfs (or 4 floats) per store
layout(binding = BINDING_C) writeonly buffer C4 { vec4 c4[]; };
// Split-K workspace: batch * splits fp32 partial products of M x N, one after another.
layout(binding = BINDING_WORKSPACE) buffer W { float ws[]; };
layout(binding = BINDING_WORKSPACE) buffer W4 { vec4 ws4[]; };
layout(binding = BINDING_BIAS) readonly buffer Bias { float bias[]; };   // N values, fp32
#define C_AT(i) c[i]
#define C_IN_AT(i) c_in[i]
#define BIAS_AT(i) bias[i]
#endif

// One element of C, in and out, as fp32.
float load_c(uint i) {
#ifdef OUT_BF16
    return bf16_to_f32(uint(C_IN_AT(i)));
#else
    return float(C_IN_AT(i));
#endif
}
void store_c(uint i, float v) {
#ifdef OUT_BF16
    C_AT(i) = uint16_t(f32_to_bf16(v));
#else
    C_AT(i) = OUT_T(v);
#endif
}
// v as store_c leaves it in C.
float as_c(float v) {
#if defined(OUT_BF16)
    return bf16_to_f32(f32_to_bf16(v));
#elif defined(OUT_F16)
    return round_f16(v);
#else
    return v;
#endif
}
// Eight consecutive 16-bit outputs packed for one 16-byte store.
uvec4 pack8_out(float v[8]) {
#ifdef OUT_BF16
    return uvec4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7]));
#else
    return uvec4(packFloat2x16(f16vec2(float16_t(v[0]), float16_t(v[1]))),
                 packFloat2x16(f16vec2(float16_t(v[2]), float16_t(v[3]))),
                 packFloat2x16(f16vec2(float16_t(v[4]), float16_t(v[5]))),
                 packFloat2x16(f16vec2(float16_t(v[6]), float16_t(v[7]))));
#endif
}

// One input element as fp32 (the scalar kernels).
float in_a(uint i) {
#ifdef IN_BF16
    return bf16_to_f32(uint(a16[i]));
#else
    return float(ah[i]);
#endif
}
float in_b(uint i) {
#ifdef IN_BF16
    return bf16_to_f32(uint(b16[i]));
#else
    return float(bh[i]);
#endif
}

// act(alpha * x + beta * C[ci] + bias[col]) in fp32; ci indexes C (batch included).
float epilogue(float x, uint ci, uint col) {
    if ((EPI & EPI_ALPHA) != 0u) x *= p.alpha;
    if ((EPI & EPI_BETA) != 0u) x += p.beta * load_c(ci);
    if ((EPI & EPI_BIAS) != 0u) x += BIAS_AT(col);
    return activate(x);
}

#ifndef PERSIST
// Eight consecutive elements of C at element ci (column q) from their fp32 values:
// the epilogue applied, then one 16-byte store (two for fp32 output).
void store8_c(uint ci, uint q, float v[8]) {
    [[unroll]] for (uint t = 0; t < 8u; t++) v[t] = epilogue(v[t], ci + t, q + t);
#if defined(OUT_F16) || defined(OUT_BF16)
    c128[ci / 8u] = pack8_out(v);
#else
    c4[ci / 4u] = vec4(v[0], v[1], v[2], v[3]);
    c4[ci / 4u + 1u] = vec4(v[4], v[5], v[6], v[7]);
#endif
}
#endif
