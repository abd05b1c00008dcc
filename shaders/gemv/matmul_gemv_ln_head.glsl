// matmul_gemv_ln_head.glsl — the LayerNorm whose output is a one-row product's A, as
// the matrix-vector kernel's head (matmul_gemv_ln.comp): every workgroup normalizes
// the row itself, as layernorm.comp's forward does (layernorm_row.glsl), into shared
// memory, where its subgroups read A; workgroup 0 also writes the norm's outputs.
// v = X (+ R, the 16-bit branch added to the fp32 stream, with FLAG_LN_RESIDUAL; then
// XOUT = v), STATS = (mean, rstd), rstd = 1/sqrt(biased variance + eps), H = (v -
// mean) * rstd * GAMMA + BETA in A's type (FLAG_LN_RMS: RMSNorm, mean 0 and no BETA). The
// row is K wide: a multiple of 8, at most
// LN_THREADS x 4 x LN_GROUPS; X, GAMMA, BETA and XOUT start on 16 bytes, R and H on 8
// (plan_steps.c fuses only such rows).
#include "../elementwise/layernorm_row.glsl"

#ifdef PERSIST
// A run member's norm (matmul_gemv_persist.comp): the stream and the branch may be an
// earlier member's outputs, read around L1.
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent readonly buffer LnX { vec4 v[]; } ps_ln_x4[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent readonly buffer LnR { uvec2 v[]; } ps_ln_r4[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) readonly buffer LnGamma { vec4 v[]; } ps_ln_gamma4[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent writeonly buffer LnXOut { vec4 v[]; } ps_ln_xout4[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent writeonly buffer LnH { uvec2 v[]; } ps_ln_h4[PERSIST_MEMBERS * PERSIST_ROLES];
layout(set = PERSIST_SET, binding = BINDING_PERSIST) coherent writeonly buffer LnStats { float v[]; } ps_ln_stats[PERSIST_MEMBERS * PERSIST_ROLES];
#define ln_x4 ps_ln_x4[pm + PERSIST_X].v
#define ln_r4 ps_ln_r4[pm + PERSIST_R].v
#define ln_gamma4 ps_ln_gamma4[pm + PERSIST_GAMMA].v
#define ln_beta4 ps_ln_gamma4[pm + PERSIST_BETA].v
#define ln_xout4 ps_ln_xout4[pm + PERSIST_XOUT].v
#define ln_h4 ps_ln_h4[pm + PERSIST_H].v
#define ln_stats ps_ln_stats[pm + PERSIST_STATS].v
#else
layout(binding = BINDING_X) readonly buffer LnX { vec4 ln_x4[]; };
layout(binding = BINDING_R) readonly buffer LnR { uvec2 ln_r4[]; };
layout(binding = BINDING_GAMMA) readonly buffer LnGamma { vec4 ln_gamma4[]; };
layout(binding = BINDING_BETA) readonly buffer LnBeta { vec4 ln_beta4[]; };
layout(binding = BINDING_XOUT) writeonly buffer LnXOut { vec4 ln_xout4[]; };
layout(binding = BINDING_H) writeonly buffer LnH { uvec2 ln_h4[]; };
layout(binding = BINDING_STATS) writeonly buffer LnStats { float ln_stats[]; };

#endif

// Groups of 4 columns an invocation holds: rows of up to 4096 (plan_steps.c's GEMV_LN_MAX).
#ifdef PERSIST
const uint LN_GROUPS = 2u;  // a run member's norm: rows of up to 2048, fewer registers (plan_persist.c)
#else
const uint LN_GROUPS = 4u;
#endif

#ifdef PERSIST
const uint LN_A_WORDS = 2048u;  // a run member's A (its norm's output or a copy of A): rows of up to 8192
#else
const uint LN_A_WORDS = LN_GROUPS * LN_THREADS;
#endif
shared uvec2 ln_a[LN_A_WORDS];  // the normalized row, A's type, 4 a word

#ifdef PERSIST
// A run member's GAMMA and BETA, staged into ln_a before the member's grid wait and its
// first weight words (persist_runtime.glsl): loaded after them, they came from DRAM
// behind every workgroup's first weight words (results/h100-registers-7ac4f44). ln_a
// is free until the head writes the row, after every invocation has read its groups
// back: group j of GAMMA in words 2j and 2j + 1, of BETA in LN_BETA_AT + 2j and + 1
// (rows of up to 2048: 512 groups).
const uint LN_BETA_AT = LN_A_WORDS / 2u;
void ln_stage_affine() {
    const uint t = gl_LocalInvocationID.x, d4 = p.K / 4u;
    const bool rms = (p.flags & FLAG_LN_RMS) != 0u;
    [[unroll]] for (uint c = 0u; c < LN_GROUPS; c++) {
        const uint j = t + LN_THREADS * c;  // the invocation's own groups: ln_head reads them
        if (j < d4) {
            const vec4 g = ln_gamma4[j];
            ln_a[2u * j] = floatBitsToUint(g.xy);
            ln_a[2u * j + 1u] = floatBitsToUint(g.zw);
            if (!rms) {
                const vec4 b = ln_beta4[j];
                ln_a[LN_BETA_AT + 2u * j] = floatBitsToUint(b.xy);
                ln_a[LN_BETA_AT + 2u * j + 1u] = floatBitsToUint(b.zw);
            }
        }
    }
}
vec4 ln_staged(uint w) { return vec4(uintBitsToFloat(ln_a[w]), uintBitsToFloat(ln_a[w + 1u])); }
#define LN_LOAD_GAMMA(j) ln_staged(2u * (j))
#define LN_LOAD_BETA(j) ln_staged(LN_BETA_AT + 2u * (j))
#else
#define LN_LOAD_GAMMA(j) ln_gamma4[j]
#define LN_LOAD_BETA(j) ln_beta4[j]
#endif

// Eight elements of the normalized row from k (a multiple of 8) as fp32.
void ln_a8(uint k, out float a[8]) {
    const vec4 lo = load16x4(ln_a[k / 4u]), hi = load16x4(ln_a[k / 4u + 1u]);
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        a[j] = lo[j];
        a[4u + j] = hi[j];
    }
}

// Every invocation (barriers): the row normalized into ln_a. The loads of X, R, GAMMA
// and BETA (a run member's: staged) are all in flight before the first sum.
void ln_head() {
    const uint t = gl_LocalInvocationID.x, d4 = p.K / 4u;
    const bool residual = (p.flags & FLAG_LN_RESIDUAL) != 0u, writer = gl_WorkGroupID.x == 0u;
    const bool rms = (p.flags & FLAG_LN_RMS) != 0u;
    vec4 v[LN_GROUPS], g[LN_GROUPS], b[LN_GROUPS];
    vec2 acc = vec2(0.0);
    [[unroll]] for (uint c = 0u; c < LN_GROUPS; c++) {
        const uint j = t + LN_THREADS * c;
        v[c] = g[c] = b[c] = vec4(0.0);
        if (j < d4) {
            v[c] = ln_x4[j];
            if (residual) v[c] += load16x4(ln_r4[j]);
            g[c] = LN_LOAD_GAMMA(j);
            if (!rms) b[c] = LN_LOAD_BETA(j);
            acc.x += ln_sum4(v[c]);
        }
    }
    const float sum = rms ? 0.0 : wg_sum(acc).x;  // RMSNorm has no mean (rms: the op's flags, uniform)
    const float mean = rms ? 0.0 : sum / float(p.K);
    acc = vec2(0.0);
    [[unroll]] for (uint c = 0u; c < LN_GROUPS; c++)
        if (t + LN_THREADS * c < d4) acc.x += ln_square4(v[c], mean);
    const float rstd = inversesqrt(wg_sum(acc).x / float(p.K) + p.ln_eps);
    [[unroll]] for (uint c = 0u; c < LN_GROUPS; c++) {
        const uint j = t + LN_THREADS * c;
        if (j < d4) {
            const uvec2 h = store16x4(ln_affine4(v[c], mean, rstd, g[c], b[c]));
            ln_a[j] = h;
            if (writer) {
                ln_h4[j] = h;
                if (residual) ln_xout4[j] = v[c];
            }
        }
    }
    if (writer && t == 0u) {
        ln_stats[0] = mean;
        ln_stats[1] = rstd;
    }
    barrier();  // the row in shared memory before any subgroup reads it
}
