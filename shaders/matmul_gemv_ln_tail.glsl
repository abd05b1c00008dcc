// matmul_gemv_ln_tail.glsl — LayerNorm of the row a one-row product just wrote
// (matmul_gemv_ln.comp), as layernorm.comp's forward with a residual computes it:
// v = X + C (C, the product's 16-bit output, is the branch added to the fp32 stream),
// XOUT = v, H = (v - mean) * rstd * GAMMA + BETA rounded to C's type, rstd =
// 1/sqrt(biased variance + eps), STATS = (mean, rstd). Every workgroup counts itself in on ARRIVED (zeroed by
// the plan before each replay); the last to arrive normalizes, the row being N wide.

layout(binding = BINDING_X) readonly buffer LnX { float ln_x[]; };
layout(binding = BINDING_GAMMA) readonly buffer LnGamma { float ln_gamma[]; };
layout(binding = BINDING_BETA) readonly buffer LnBeta { float ln_beta[]; };
layout(binding = BINDING_XOUT) writeonly buffer LnXOut { float ln_xout[]; };
layout(binding = BINDING_H) writeonly buffer LnH { OUT_T ln_h[]; };
layout(binding = BINDING_STATS) writeonly buffer LnStats { float ln_stats[]; };
layout(binding = BINDING_ARRIVED) coherent buffer LnArrived { uint ln_arrived[]; };

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

void store_h(uint i, float v) {
#ifdef OUT_BF16
    ln_h[i] = uint16_t(f32_to_bf16(v));
#else
    ln_h[i] = OUT_T(v);
#endif
}

// Row elements per invocation, held in registers so that every load of the row is in
// flight at once (the tail runs in one workgroup: its loads' latency is its time). The
// plan fuses rows of at most LN_PER x the workgroup's size (plan.c, GEMV_LN_PER).
const uint LN_PER = 32u;

void ln_tail() {
    memoryBarrierBuffer();  // this workgroup's outputs, before its arrival is counted
    barrier();
    if (gl_LocalInvocationID.x == 0u)
        ln_last = atomicAdd(ln_arrived[0], 1u) == gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z - 1u;
    barrier();
    if (!ln_last) return;
    memoryBarrierBuffer();  // the other workgroups' outputs, after their arrivals
    const uint t = gl_LocalInvocationID.x, d = p.N, step = gl_WorkGroupSize.x;
    float v[LN_PER];
    float s = 0.0;
    [[unroll]] for (uint i = 0u; i < LN_PER; i++) {
        const uint j = i * step + t;
        v[i] = j < d ? ln_x[j] + load_c(j) : 0.0;
        s += v[i];
    }
    const float mean = ln_sum(s) / float(d);
    s = 0.0;
    [[unroll]] for (uint i = 0u; i < LN_PER; i++) {
        const float e = i * step + t < d ? v[i] - mean : 0.0;
        s += e * e;
    }
    const float rstd = inversesqrt(ln_sum(s) / float(d) + p.ln_eps);
    [[unroll]] for (uint i = 0u; i < LN_PER; i++) {
        const uint j = i * step + t;
        if (j < d) {
            ln_xout[j] = v[i];
            store_h(j, (v[i] - mean) * rstd * ln_gamma[j] + ln_beta[j]);
        }
    }
    if (t == 0u) {
        ln_stats[0] = mean;
        ln_stats[1] = rstd;
    }
}
