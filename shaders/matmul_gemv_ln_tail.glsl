// matmul_gemv_ln_tail.glsl — LayerNorm of the row a one-row product just wrote
// (matmul_gemv_ln.comp), as layernorm.comp's forward with a residual computes it:
// v = X + C (C, the product's 16-bit output, is the branch added to the fp32 stream),
// XOUT = v, H = (v - mean) * rstd * GAMMA + BETA rounded to C's type, rstd =
// 1/sqrt(biased variance + eps), STATS = (mean, rstd). Every workgroup counts itself
// in on ARRIVED (zeroed by the plan before each replay); the last to arrive
// normalizes, the row being N wide. The plan fuses rows of a multiple of 8 elements
// whose tensors start on 16 bytes, at most LN_GROUPS x 8 x the workgroup's size.

layout(binding = BINDING_X) readonly buffer LnX { vec4 ln_x4[]; };
layout(binding = BINDING_GAMMA) readonly buffer LnGamma { vec4 ln_gamma4[]; };
layout(binding = BINDING_BETA) readonly buffer LnBeta { vec4 ln_beta4[]; };
layout(binding = BINDING_XOUT) writeonly buffer LnXOut { vec4 ln_xout4[]; };
layout(binding = BINDING_H) writeonly buffer LnH { uvec4 ln_h8[]; };
layout(binding = BINDING_STATS) writeonly buffer LnStats { float ln_stats[]; };
layout(binding = BINDING_ARRIVED) coherent buffer LnArrived { uint ln_arrived[]; };
// What the other workgroups wrote, read once they have counted in: 16-byte words, as
// few reads through the coherent binding as the row allows.
layout(binding = BINDING_C) coherent readonly buffer LnC { uvec4 ln_c8[]; };

shared float ln_red[NSG];
shared bool ln_last;

// The workgroup's sum of v, in every invocation (uniform control flow).
float ln_sum(float v) {
    v = subgroupAdd(v);
    if (gl_SubgroupInvocationID == 0u) ln_red[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0u; i < NSG; i++) s += ln_red[i];
    barrier();
    return s;
}

// 8-element groups of the row an invocation holds in registers, so that every load of
// the row is in flight at once (the tail runs in one workgroup: its loads' latency is
// its time). plan.c's GEMV_LN_PER is LN_GROUPS x 8.
const uint LN_GROUPS = 4u;

void ln_tail() {
    memoryBarrierBuffer();  // this workgroup's outputs, before its arrival is counted
    barrier();
    if (gl_LocalInvocationID.x == 0u)
        ln_last = atomicAdd(ln_arrived[0], 1u) == gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z - 1u;
    barrier();
    if (!ln_last) return;
    memoryBarrierBuffer();  // the other workgroups' outputs, after their arrivals
    const uint t = gl_LocalInvocationID.x, groups = p.N / 8u, step = gl_WorkGroupSize.x;
    float v[LN_GROUPS * 8u];
    float s = 0.0;
    [[unroll]] for (uint i = 0u; i < LN_GROUPS; i++) {
        const uint g = i * step + t;
        float c[8];
        widen8(g < groups ? ln_c8[g] : uvec4(0u), c);  // C is of A's 16-bit type (families.py)
        const vec4 x0 = g < groups ? ln_x4[2u * g] : vec4(0.0), x1 = g < groups ? ln_x4[2u * g + 1u] : vec4(0.0);
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            v[8u * i + e] = x0[e] + c[e];
            v[8u * i + 4u + e] = x1[e] + c[4u + e];
        }
        [[unroll]] for (uint e = 0u; e < 8u; e++) s += v[8u * i + e];
    }
    const float mean = ln_sum(s) / float(p.N);
    s = 0.0;
    [[unroll]] for (uint i = 0u; i < LN_GROUPS; i++) {
        if (i * step + t < groups) {
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                const float d = v[8u * i + e] - mean;
                s += d * d;
            }
        }
    }
    const float rstd = inversesqrt(ln_sum(s) / float(p.N) + p.ln_eps);
    [[unroll]] for (uint i = 0u; i < LN_GROUPS; i++) {
        const uint g = i * step + t;
        if (g < groups) {
            const vec4 g0 = ln_gamma4[2u * g], g1 = ln_gamma4[2u * g + 1u];
            const vec4 b0 = ln_beta4[2u * g], b1 = ln_beta4[2u * g + 1u];
            float h[8];
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                h[e] = (v[8u * i + e] - mean) * rstd * g0[e] + b0[e];
                h[4u + e] = (v[8u * i + 4u + e] - mean) * rstd * g1[e] + b1[e];
            }
            ln_xout4[2u * g] = vec4(v[8u * i], v[8u * i + 1u], v[8u * i + 2u], v[8u * i + 3u]);
            ln_xout4[2u * g + 1u] = vec4(v[8u * i + 4u], v[8u * i + 5u], v[8u * i + 6u], v[8u * i + 7u]);
            ln_h8[g] = pack8_out(h);
        }
    }
    if (t == 0u) {
        ln_stats[0] = mean;
        ln_stats[1] = rstd;
    }
}
