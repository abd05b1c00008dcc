// layernorm_row.glsl — what layernorm.comp's forward and the matrix-vector kernel's
// LayerNorm head (matmul_gemv_ln_head.glsl) share, so that both compute a row the same
// way: a row held as groups of 4 columns, group c of invocation t at t + LN_THREADS c;
// four 16-bit values (IN_BF16: bfloat16) in an 8-byte word; the workgroup's sums; and
// the norm's arithmetic on a group (biased variance, torch's). The includer runs
// LN_THREADS invocations and enables 16-bit float arithmetic types.
#ifndef HELIOS_LAYERNORM_ROW_GLSL
#define HELIOS_LAYERNORM_ROW_GLSL
#include "../common/bf16.glsl"

const uint LN_THREADS = 256u;

vec4 load16x4(uvec2 w) {
#ifdef IN_BF16
    return vec4(bf16_to_f32(w.x & 0xFFFFu), bf16_to_f32(w.x >> 16), bf16_to_f32(w.y & 0xFFFFu), bf16_to_f32(w.y >> 16));
#else
    return vec4(unpackFloat2x16(w.x), unpackFloat2x16(w.y));
#endif
}
uvec2 store16x4(vec4 v) {
#ifdef IN_BF16
    return uvec2(pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w));
#else
    return uvec2(packFloat2x16(f16vec2(v.xy)), packFloat2x16(f16vec2(v.zw)));
#endif
}

shared vec2 red[64];

// The sum of v over the workgroup, in every invocation (uniform control flow).
vec2 wg_sum(vec2 v) {
    v = subgroupAdd(v);
    if (gl_SubgroupInvocationID == 0u) red[gl_SubgroupID] = v;
    barrier();
    vec2 s = vec2(0.0);
    for (uint i = 0u; i < gl_NumSubgroups; i++) s += red[i];
    barrier();
    return s;
}

float ln_sum4(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
float ln_square4(vec4 v, float mean) { return dot(v - mean, v - mean); }
// The norm's output, one formula for an element and for a group of 4.
#define LN_AFFINE(v, mean, rstd, gamma, beta) (((v) - (mean)) * (rstd) * (gamma) + (beta))
float ln_affine(float v, float mean, float rstd, float gamma, float beta) { return LN_AFFINE(v, mean, rstd, gamma, beta); }
vec4 ln_affine4(vec4 v, float mean, float rstd, vec4 gamma, vec4 beta) { return LN_AFFINE(v, mean, rstd, gamma, beta); }

#endif
