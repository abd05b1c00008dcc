#version 460
// attention_scalar.comp — the fallback attention forward for devices without
// cooperative matrices (or HELIOS_DISABLE_COOP_ATTENTION=1) and head sizes the
// coop kernel does not take: one invocation per query row, an online softmax
// over every key in fp32, the output row held in registers (D <= 256).
// Layout and masking as attention_coop.comp.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x = 64) in;
#include "spec_attention_scalar.glsl"   // D, CAUSAL (shaders/families.py)

layout(push_constant) uniform Push {
    uint heads;
    uint sq, skv;
    float scale_log2;
} p;

layout(set = 0, binding = BINDING_Q) readonly buffer Q { float16_t q[]; };
layout(set = 0, binding = BINDING_K) readonly buffer K { float16_t k[]; };
layout(set = 0, binding = BINDING_O) writeonly buffer O { float16_t o[]; };
layout(set = 0, binding = BINDING_V) readonly buffer V { float16_t v[]; };

void main() {
    const uint row = gl_GlobalInvocationID.x, bh = gl_WorkGroupID.y;
    if (row >= p.sq) return;
    const uint qb = (bh * p.sq + row) * D, kb = bh * p.skv * D;
    float qr[D], acc[D];
    for (uint d = 0; d < D; d++) {
        qr[d] = float(q[qb + d]) * p.scale_log2;
        acc[d] = 0.0;
    }
    float m = -1.0 / 0.0, l = 0.0;
    const uint kv_end = CAUSAL != 0 ? min(p.skv, row + 1) : p.skv;
    for (uint j = 0; j < kv_end; j++) {
        float s = 0.0;
        for (uint d = 0; d < D; d++) s += qr[d] * float(k[kb + j * D + d]);
        // A key scored -inf contributes nothing: a row whose every key is -inf
        // outputs 0, as the coop kernel and torch's math backend do (not NaN).
        // Selects, not a branch: a branch here cost 2.2x at d=64 on the H100.
        const float m_new = max(m, s);
        const bool none = m_new == -1.0 / 0.0;
        const float alpha = none ? 1.0 : exp2(m - m_new), pj = none ? 0.0 : exp2(s - m_new);
        l = l * alpha + pj;
        for (uint d = 0; d < D; d++) acc[d] = acc[d] * alpha + pj * float(v[kb + j * D + d]);
        m = m_new;
    }
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    for (uint d = 0; d < D; d++) o[qb + d] = float16_t(acc[d] * inv);
}
