#version 460
// layernorm.comp — LayerNorm over the rows of an fp32 residual stream, both
// directions, one row at a time per workgroup (256 invocations, each holding its
// CPT columns of the row in registers).
//
// PASS 0 (forward), row i:  v = X[i] (+ R[i], a 16-bit branch output added to the
//   stream: RESIDUAL), written to XOUT when RESIDUAL; mean and rstd = 1/sqrt(var +
//   eps) (biased variance, torch's) to STATS[2i], STATS[2i+1]; H[i] = (v - mean) *
//   rstd * gamma + beta rounded to the 16-bit type.
// PASS 1 (backward), rows [g*ROWS, (g+1)*ROWS) per workgroup g: from the output's
//   gradient GH (16-bit), the stream X and STATS: xhat = (x - mean) rstd,
//   gg = GH gamma, GX = rstd (gg - mean(gg) - xhat mean(gg xhat)) (+ GRES, the
//   gradient reaching the stream from above: RESIDUAL), written in fp32 to GX and
//   rounded to GX16; per workgroup the column sums of GH xhat and GH (the partial
//   gamma and beta gradients) to PARTIAL[g] (2 x D), summed over workgroups after.
// fp32 arithmetic throughout; bfloat16 (IN_BF16) as 16-bit words.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#include "spec_layernorm.glsl"
#include "bf16.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Params {
    uint rows, d;
    float eps;
} p;

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

void forward_row(uint row) {
    const uint t = gl_LocalInvocationID.x, base = row * p.d;
    float v[CPT];
    vec2 acc = vec2(0.0);
    [[unroll]] for (uint c = 0u; c < CPT; c++) {
        const uint j = t + 256u * c;
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
    const float mean = wg_sum(acc).x / float(p.d);
    acc = vec2(0.0);
    [[unroll]] for (uint c = 0u; c < CPT; c++)
        if (t + 256u * c < p.d) acc.x += (v[c] - mean) * (v[c] - mean);
    const float rstd = inversesqrt(wg_sum(acc).x / float(p.d) + p.eps);
    [[unroll]] for (uint c = 0u; c < CPT; c++) {
        const uint j = t + 256u * c;
        if (j < p.d) h16[base + j] = store16((v[c] - mean) * rstd * gamma[j] + beta[j]);
    }
    if (t == 0u) {
        stats[2u * row] = mean;
        stats[2u * row + 1u] = rstd;
    }
}

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const uint t = gl_LocalInvocationID.x;
    if (PASS == 0u) {
        if (g < p.rows) forward_row(g);  // uniform per workgroup
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
            const uint j = t + 256u * c;
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
            const uint j = t + 256u * c;
            if (j < p.d) {
                float v = rstd * (gg[c] - s.x - xhat[c] * s.y);
                if (RESIDUAL != 0u) v += gres[base + j];
                gx[base + j] = v;
                gx16[base + j] = store16(v);
            }
        }
    }
    [[unroll]] for (uint c = 0u; c < CPT; c++) {
        const uint j = t + 256u * c;
        if (j < p.d) {
            partial[(2u * g) * p.d + j] = dgamma[c];
            partial[(2u * g + 1u) * p.d + j] = dbeta[c];
        }
    }
}
