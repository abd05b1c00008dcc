#version 460
// attention_bwd_scalar.comp — the fallback attention backward for devices without
// cooperative matrices (or HELIOS_DISABLE_COOP_ATTENTION_BACKWARD=1), in fp32
// arithmetic, in two passes of the same shader (PASS, a constant):
//   0: one invocation per query row: delta = dO . O (written for pass 1) and
//      dQ = scale * sum_j dS_j K_j;
//   1: one invocation per key row: dV = sum_i P_i dO_i, dK = scale * sum_i dS_i Q_i;
// with P = exp(scale * q.k - lse) from the forward's log-sum-exp and
// dS = P (dO . v - delta). Layout (attention_layout.glsl) and masking as
// attention_scalar.comp.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 64) in;
#include "spec_attention_bwd_scalar.glsl"   // D, CAUSAL, PASS (shaders/families.py)

#include "push_attention_bwd.glsl"  // the push words (shaders/layouts.py)
#include "../attention/attention_layout.glsl"

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
layout(set = 0, binding = BINDING_V) readonly buffer V { ELEM_T v[]; };
layout(set = 0, binding = BINDING_O) readonly buffer O { ELEM_T o[]; };
layout(set = 0, binding = BINDING_DO) readonly buffer DO { ELEM_T dout[]; };
layout(set = 0, binding = BINDING_LSE) readonly buffer Lse { float lse[]; };
layout(set = 0, binding = BINDING_DELTA) buffer Delta { float delta[]; };
layout(set = 0, binding = BINDING_DQ) writeonly buffer DQ { ELEM_T dq[]; };
layout(set = 0, binding = BINDING_DK) writeonly buffer DK { ELEM_T dk[]; };
layout(set = 0, binding = BINDING_DV) writeonly buffer DVB { ELEM_T dv[]; };

const float LOG2E = 1.4426950408889634;

void query_row(uint bh, uint row) {
    const uint qp = pitch_elem(QKV_RS);
    const uint qb = head_elem(bh, p.sq, QKV_RS, p.q_off) + row * qp;
    const uint ob = head_elem(bh, p.sq, O_RS, 0u) + row * pitch_elem(O_RS);
    const uint kb = head_elem(bh, p.skv, QKV_RS, p.k_off), vb = head_elem(bh, p.skv, QKV_RS, p.v_off);
    float qr[D], dor[D], acc[D];
    float dl = 0.0;
    for (uint d = 0; d < D; d++) {
        qr[d] = widen(q[qb + d]) * p.scale_log2;
        dor[d] = widen(dout[ob + d]);
        dl += dor[d] * widen(o[ob + d]);
        acc[d] = 0.0;
    }
    delta[bh * p.sq + row] = dl;
    const float l2 = lse[bh * p.sq + row] * LOG2E;
    const uint kv_end = CAUSAL != 0 ? min(p.skv, row + 1) : p.skv;
    for (uint j = 0; j < kv_end; j++) {
        float s = 0.0, dp = 0.0;
        for (uint d = 0; d < D; d++) {
            s += qr[d] * widen(k[kb + j * qp + d]);
            dp += dor[d] * widen(v[vb + j * qp + d]);
        }
        const float ds = exp2(s - l2) * (dp - dl);
        for (uint d = 0; d < D; d++) acc[d] += ds * widen(k[kb + j * qp + d]);
    }
    for (uint d = 0; d < D; d++) dq[qb + d] = narrow(acc[d] * p.scale);  // dQ lies where Q does
}

void key_row(uint bh, uint col) {
    const uint qp = pitch_elem(QKV_RS), op = pitch_elem(O_RS);
    const uint kb = head_elem(bh, p.skv, QKV_RS, p.k_off) + col * qp;
    const uint vb = head_elem(bh, p.skv, QKV_RS, p.v_off) + col * qp;
    const uint qb = head_elem(bh, p.sq, QKV_RS, p.q_off), ob = head_elem(bh, p.sq, O_RS, 0u);
    float kr[D], vr[D], ak[D], av[D];
    for (uint d = 0; d < D; d++) {
        kr[d] = widen(k[kb + d]) * p.scale_log2;
        vr[d] = widen(v[vb + d]);
        ak[d] = 0.0;
        av[d] = 0.0;
    }
    for (uint i = CAUSAL != 0 ? col : 0; i < p.sq; i++) {
        float s = 0.0, dp = 0.0;
        for (uint d = 0; d < D; d++) {
            s += kr[d] * widen(q[qb + i * qp + d]);
            dp += vr[d] * widen(dout[ob + i * op + d]);
        }
        const float pr = exp2(s - lse[bh * p.sq + i] * LOG2E);
        const float ds = pr * (dp - delta[bh * p.sq + i]);
        for (uint d = 0; d < D; d++) {
            av[d] += pr * widen(dout[ob + i * op + d]);
            ak[d] += ds * widen(q[qb + i * qp + d]);
        }
    }
    for (uint d = 0; d < D; d++) {
        dk[kb + d] = narrow(ak[d] * p.scale);
        dv[vb + d] = narrow(av[d]);
    }
}

void main() {
    const uint row = gl_GlobalInvocationID.x, bh = gl_WorkGroupID.y;
    if (PASS == 0) {
        if (row < p.sq) query_row(bh, row);
    } else if (row < p.skv) {
        key_row(bh, row);
    }
}
