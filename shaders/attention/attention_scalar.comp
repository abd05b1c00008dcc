#version 460
// attention_scalar.comp — the fallback attention forward for devices without
// cooperative matrices (or HELIOS_DISABLE_COOP_ATTENTION=1) and head sizes the
// coop kernel does not take: one invocation per query row, an online softmax
// over every key in fp32, the output row held in registers (D <= 256).
// Layout (attention_layout.glsl), masking and the LSE output as attention_coop.comp. IN_BF16: Q, K, V and O are
// bfloat16, read as 16-bit words and widened (fp32 arithmetic either way).
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 64) in;
#include "spec_attention_scalar.glsl"   // D, CAUSAL (shaders/families.py)

#include "push_attention.glsl"  // the push words (shaders/layouts.py)
#include "attention_layout.glsl"

#include "../common/bf16.glsl"
#ifdef IN_BF16
#define ELEM_T uint16_t
float widen(uint16_t x) { return bf16_to_f32(uint(x)); }
uint16_t narrow(float x) { return uint16_t(f32_to_bf16(x)); }
#else
#define ELEM_T float16_t
float widen(float16_t x) { return float(x); }
float16_t narrow(float x) { return float16_t(x); }
#endif
layout(set = 0, binding = BINDING_Q) readonly buffer Q { ELEM_T q[]; };
layout(set = 0, binding = BINDING_K) readonly buffer K { ELEM_T k[]; };
layout(set = 0, binding = BINDING_O) writeonly buffer O { ELEM_T o[]; };
layout(set = 0, binding = BINDING_V) readonly buffer V { ELEM_T v[]; };
layout(set = 0, binding = BINDING_LSE) writeonly buffer Lse { float lse[]; };  // LSE != 0: per row

void main() {
    const uint row = gl_GlobalInvocationID.x, bh = gl_WorkGroupID.y;
    if (row >= p.sq) return;
    const uint qp = pitch_elem(QKV_RS), op = pitch_elem(O_RS);
    const uint qb = head_elem(bh, p.sq, QKV_RS, p.q_off) + row * qp;
    const uint kb = head_elem(bh, p.skv, QKV_RS, p.k_off), vb = head_elem(bh, p.skv, QKV_RS, p.v_off);
    const uint ob = head_elem(bh, p.sq, O_RS, 0u) + row * op;
    float qr[D], acc[D];
    for (uint d = 0; d < D; d++) {
        qr[d] = widen(q[qb + d]) * p.scale_log2;
        acc[d] = 0.0;
    }
    float m = -1.0 / 0.0, l = 0.0;
    const uint kv_end = CAUSAL != 0 ? min(p.skv, row + 1) : p.skv;
    for (uint j = 0; j < kv_end; j++) {
        float s = 0.0;
        for (uint d = 0; d < D; d++) s += qr[d] * widen(k[kb + j * qp + d]);
        // A key scored -inf contributes nothing: a row whose every key is -inf
        // outputs 0, as the coop kernel and torch's math backend do (not NaN).
        // Selects, not a branch: a branch here cost 2.2x at d=64 on the H100.
        const float m_new = max(m, s);
        const bool none = m_new == -1.0 / 0.0;
        const float alpha = none ? 1.0 : exp2(m - m_new), pj = none ? 0.0 : exp2(s - m_new);
        l = l * alpha + pj;
        for (uint d = 0; d < D; d++) acc[d] = acc[d] * alpha + pj * widen(v[vb + j * qp + d]);
        m = m_new;
    }
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    for (uint d = 0; d < D; d++) o[ob + d] = narrow(acc[d] * inv);
    // log-sum-exp of the scaled scores in natural-log units (m is in log2 units)
    if (LSE != 0) lse[bh * p.sq + row] = l > 0.0 ? (m + log2(l)) * 0.6931471805599453 : 1.0 / 0.0;
}
