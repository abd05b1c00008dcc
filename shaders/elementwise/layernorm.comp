#version 460
// layernorm.comp — LayerNorm over the rows of an fp32 residual stream, both
// directions, one row at a time per workgroup (256 invocations, each holding its
// CPT columns of the row in registers).
//
// PASS 0 (forward), row i:  v = X[i] (+ R[i], a 16-bit branch output added to the
//   stream: RESIDUAL), written to XOUT when RESIDUAL; mean and rstd = 1/sqrt(var +
//   eps) (biased variance, torch's) to STATS[2i], STATS[2i+1]; H[i] = (v - mean) *
//   rstd * gamma + beta rounded to the 16-bit type. RMS: RMSNorm, mean 0 and no beta
//   (H[i] = v rstd gamma, rstd = 1/sqrt(mean(v^2) + eps), as Llama's).
// PASS 1 (backward), rows [g*ROWS, (g+1)*ROWS) per workgroup g: from the output's
//   gradient GH (16-bit), the stream X and STATS: xhat = (x - mean) rstd,
//   gg = GH gamma, GX = rstd (gg - mean(gg) - xhat mean(gg xhat)) (+ GRES, the
//   gradient reaching the stream from above: RESIDUAL), written in fp32 to GX and
//   rounded to GX16; per workgroup the column sums of GH xhat and GH (the partial
//   gamma and beta gradients) to PARTIAL[g] (2 x D), summed over workgroups after.
// fp32 arithmetic throughout; bfloat16 (IN_BF16) as 16-bit words.
// p.vec = 1 (D % 4 == 0, fp32 tensors on 16 bytes, 16-bit ones on 8): each
// invocation holds groups of 4 consecutive columns and moves them in one 16-byte
// (fp32) or 8-byte (16-bit) access, a quarter of the requests of the scalar path.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#include "spec_layernorm.glsl"
#include "layernorm_row.glsl"

layout(local_size_x = LN_THREADS) in;

#include "push_layernorm.glsl"  // the push words (shaders/layouts.py)

layout(binding = BINDING_X) readonly buffer X { float x[]; };
layout(binding = BINDING_R) readonly buffer R16 { uint16_t r16[]; };     // forward: the branch added
layout(binding = BINDING_GAMMA) readonly buffer Gamma { float gamma[]; };
layout(binding = BINDING_BETA) readonly buffer Beta { float beta[]; };
layout(binding = BINDING_XOUT) writeonly buffer XOut { float xout[]; };  // forward: X + R
layout(binding = BINDING_H) buffer H16 { uint16_t h16[]; };              // forward: written; backward: GH read
layout(binding = BINDING_STATS) buffer Stats { float stats[]; };
layout(binding = BINDING_GRES) readonly buffer GRes { float gres[]; };
layout(binding = BINDING_GX) writeonly buffer GX { float gx[]; };
layout(binding = BINDING_GX16) writeonly buffer GX16 { uint16_t gx16[]; };
layout(binding = BINDING_PARTIAL) writeonly buffer Partial { float partial[]; };
// The same buffers 4 columns an element (p.vec).
layout(binding = BINDING_X) readonly buffer X4 { vec4 x4[]; };
layout(binding = BINDING_R) readonly buffer R4 { uvec2 r4[]; };
layout(binding = BINDING_GAMMA) readonly buffer Gamma4 { vec4 gamma4[]; };
layout(binding = BINDING_BETA) readonly buffer Beta4 { vec4 beta4[]; };
layout(binding = BINDING_XOUT) writeonly buffer XOut4 { vec4 xout4[]; };
layout(binding = BINDING_H) buffer H4 { uvec2 h4[]; };
layout(binding = BINDING_GRES) readonly buffer GRes4 { vec4 gres4[]; };
layout(binding = BINDING_GX) writeonly buffer GX4 { vec4 gx4[]; };
layout(binding = BINDING_GX16) writeonly buffer GX16x4 { uvec2 gx16x4[]; };
layout(binding = BINDING_PARTIAL) writeonly buffer Partial4 { vec4 partial4[]; };

const uint C4 = (CPT + 3u) / 4u;  // groups of 4 columns per invocation

float load16(uint16_t bits) {
#ifdef IN_BF16
    return bf16_to_f32(uint(bits));
#else
    return float(uint16BitsToFloat16(bits));
#endif
}
uint16_t store16(float v) {
#ifdef IN_BF16
    return uint16_t(f32_to_bf16(v));
#else
    return float16BitsToUint16(float16_t(v));
#endif
}

void forward_row(uint row) {
    const uint t = gl_LocalInvocationID.x, base = row * p.d;
    float v[CPT];
    vec2 acc = vec2(0.0);
    [[unroll]] for (uint c = 0u; c < CPT; c++) {
        const uint j = t + LN_THREADS * c;
        v[c] = 0.0;
        if (j < p.d) {
            v[c] = x[base + j];
            if (RESIDUAL != 0u) {
                v[c] += load16(r16[base + j]);
                xout[base + j] = v[c];
            }
            acc.x += v[c];
        }
    }
    const float mean = RMS != 0u ? 0.0 : wg_sum(acc).x / float(p.d);
    acc = vec2(0.0);
    [[unroll]] for (uint c = 0u; c < CPT; c++)
        if (t + LN_THREADS * c < p.d) acc.x += (v[c] - mean) * (v[c] - mean);
    const float rstd = inversesqrt(wg_sum(acc).x / float(p.d) + p.eps);
    [[unroll]] for (uint c = 0u; c < CPT; c++) {
        const uint j = t + LN_THREADS * c;
        if (j < p.d) h16[base + j] = store16(ln_affine(v[c], mean, rstd, gamma[j], RMS != 0u ? 0.0 : beta[j]));
    }
    if (t == 0u) {
        stats[2u * row] = mean;
        stats[2u * row + 1u] = rstd;
    }
}

void forward_row4(uint row) {
    const uint t = gl_LocalInvocationID.x, d4 = p.d / 4u, base = row * d4;
    vec4 v[C4];
    vec2 acc = vec2(0.0);
    [[unroll]] for (uint c = 0u; c < C4; c++) {
        const uint j = t + LN_THREADS * c;
        v[c] = vec4(0.0);
        if (j < d4) {
            v[c] = x4[base + j];
            if (RESIDUAL != 0u) {
                v[c] += load16x4(r4[base + j]);
                xout4[base + j] = v[c];
            }
            acc.x += ln_sum4(v[c]);
        }
    }
    const float mean = RMS != 0u ? 0.0 : wg_sum(acc).x / float(p.d);
    acc = vec2(0.0);
    [[unroll]] for (uint c = 0u; c < C4; c++)
        if (t + LN_THREADS * c < d4) acc.x += ln_square4(v[c], mean);
    const float rstd = inversesqrt(wg_sum(acc).x / float(p.d) + p.eps);
    [[unroll]] for (uint c = 0u; c < C4; c++) {
        const uint j = t + LN_THREADS * c;
        if (j < d4) h4[base + j] = store16x4(ln_affine4(v[c], mean, rstd, gamma4[j], RMS != 0u ? vec4(0.0) : beta4[j]));
    }
    if (t == 0u) {
        stats[2u * row] = mean;
        stats[2u * row + 1u] = rstd;
    }
}

void backward4(uint g) {
    const uint t = gl_LocalInvocationID.x, d4 = p.d / 4u;
    vec4 dgamma[C4], dbeta[C4];
    [[unroll]] for (uint c = 0u; c < C4; c++) {
        dgamma[c] = vec4(0.0);
        dbeta[c] = vec4(0.0);
    }
    const uint first = g * ROWS;
    for (uint row = first; row < min(first + ROWS, p.rows); row++) {
        const uint base = row * d4;
        const float mean = stats[2u * row], rstd = stats[2u * row + 1u];
        vec4 xhat[C4], gg[C4];
        vec2 acc = vec2(0.0);
        [[unroll]] for (uint c = 0u; c < C4; c++) {
            const uint j = t + LN_THREADS * c;
            xhat[c] = vec4(0.0);
            gg[c] = vec4(0.0);
            if (j < d4) {
                const vec4 gh = load16x4(h4[base + j]);
                xhat[c] = (x4[base + j] - mean) * rstd;
                gg[c] = gh * gamma4[j];
                dgamma[c] += gh * xhat[c];
                dbeta[c] += gh;
                acc += vec2((gg[c].x + gg[c].y) + (gg[c].z + gg[c].w), dot(gg[c], xhat[c]));
            }
        }
        const vec2 s = wg_sum(acc) / float(p.d);
        [[unroll]] for (uint c = 0u; c < C4; c++) {
            const uint j = t + LN_THREADS * c;
            if (j < d4) {
                vec4 v = rstd * (gg[c] - s.x - xhat[c] * s.y);
                if (RESIDUAL != 0u) v += gres4[base + j];
                gx4[base + j] = v;
                gx16x4[base + j] = store16x4(v);
            }
        }
    }
    [[unroll]] for (uint c = 0u; c < C4; c++) {
        const uint j = t + LN_THREADS * c;
        if (j < d4) {
            partial4[(2u * g) * d4 + j] = dgamma[c];
            partial4[(2u * g + 1u) * d4 + j] = dbeta[c];
        }
    }
}

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const uint t = gl_LocalInvocationID.x;
    if (PASS == 0u) {
        if (g >= p.rows) return;  // uniform per workgroup
        if (p.vec != 0u)
            forward_row4(g);
        else
            forward_row(g);
        return;
    }
    if (p.vec != 0u) {
        backward4(g);
        return;
    }
    float dgamma[CPT], dbeta[CPT];
    [[unroll]] for (uint c = 0u; c < CPT; c++) {
        dgamma[c] = 0.0;
        dbeta[c] = 0.0;
    }
    const uint first = g * ROWS;
    for (uint row = first; row < min(first + ROWS, p.rows); row++) {
        const uint base = row * p.d;
        const float mean = stats[2u * row], rstd = stats[2u * row + 1u];
        float xhat[CPT], gg[CPT];
        vec2 acc = vec2(0.0);
        [[unroll]] for (uint c = 0u; c < CPT; c++) {
            const uint j = t + LN_THREADS * c;
            xhat[c] = 0.0;
            gg[c] = 0.0;
            if (j < p.d) {
                const float gh = load16(h16[base + j]);
                xhat[c] = (x[base + j] - mean) * rstd;
                gg[c] = gh * gamma[j];
                dgamma[c] += gh * xhat[c];
                dbeta[c] += gh;
                acc += vec2(gg[c], gg[c] * xhat[c]);
            }
        }
        const vec2 s = wg_sum(acc) / float(p.d);
        [[unroll]] for (uint c = 0u; c < CPT; c++) {
            const uint j = t + LN_THREADS * c;
            if (j < p.d) {
                float v = rstd * (gg[c] - s.x - xhat[c] * s.y);
                if (RESIDUAL != 0u) v += gres[base + j];
                gx[base + j] = v;
                gx16[base + j] = store16(v);
            }
        }
    }
    [[unroll]] for (uint c = 0u; c < CPT; c++) {
        const uint j = t + LN_THREADS * c;
        if (j < p.d) {
            partial[(2u * g) * p.d + j] = dgamma[c];
            partial[(2u * g + 1u) * p.d + j] = dbeta[c];
        }
    }
}
