// decode_attention.glsl — a decode step's attention over a KV cache (flash-decoding),
// shared by decode.comp (a dispatch of its own) and matmul_gemv_persist.comp (a member
// of a persistent run): one head's split of keys a workgroup, the new position's query
// against keys 0..pos, every K and V word of the split in flight before the first is
// used, its running max, sum and unnormalised output to the partials; and the combine
// of a head's splits: OUT = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s.
// The split that owns pos writes the new K and V rows there and reads them from the
// QKV row (no other workgroup touches that row).
//
// The includer runs THREADS invocations, declares D (the head dimension), LONG_SPLITS
// (0: every split holds SPLIT_SHORT keys, ATT_FIT never reached) and IN_BF16 where the
// values are bfloat16, and defines: ATT_HEADS, ATT_KV_HEADS (heads of K and V: query
// head h reads K and V head h / (ATT_HEADS / ATT_KV_HEADS), grouped-query attention),
// ATT_ROWS (cache rows), ATT_SPLITS (splits a head in the partials), ATT_FIT
// (att_split_keys); ATT_SRC16(i), ATT_SRC128(i) (the QKV row [q | k | v]: ATT_HEADS x D,
// then ATT_KV_HEADS x D twice), ATT_KC(i), ATT_VC(i) (the caches' 16-bit elements, a row
// of ATT_KV_HEADS x D a position), ATT_KC128(i), ATT_VC128(i),
// ATT_WORK(i) (fp32 partials, coherent), ATT_OUT16(i); ATT_ROPE (true where q and the
// new k arrive unrotated: the rope op fused) and ATT_TAB(i) (its fp32 cos and sin table,
// a row of D a position); optionally ATT_SCORED(), every invocation once a split's
// scores are in (a persistent run's trace stamps it), and ATT_V_AFTER_SCORES: the V
// words loaded once the scores are summed, in flight during the softmax, not beside
// the K words (half the registers: a persistent run's kernel holds two workgroups an SM
// only within 128). fp32 arithmetic.
#ifndef HELIOS_DECODE_ATTENTION_GLSL
#define HELIOS_DECODE_ATTENTION_GLSL
#ifndef ATT_SCORED
#define ATT_SCORED()
#endif
#include "../common/bf16.glsl"

const uint THREADS = 256u;
const uint LANES = D / 8u;         // invocations a key row: 16 bytes each
const uint KPP = THREADS / LANES;  // keys a pass of the workgroup
// Keys a split (shaders/families.py's DECODE_SPLIT, the rule in shaders/layouts.py's
// SPLIT_RULES, which the host computes too): SPLIT_SHORT (short contexts still spread
// over several workgroups), or up to SPLIT_LONG. Where splits never grow the registers
// hold SPLIT_SHORT keys.
#include "decode_split.glsl"
const uint SPLIT_SHORT = DECODE_SPLIT_SHORT;
const uint SPLIT_PASSES_KEYS = DECODE_SPLIT_HELD(KPP);
const uint SPLIT_LONG = LONG_SPLITS == 0u ? SPLIT_SHORT : DECODE_SPLIT_LONG_KEYS(SPLIT_PASSES_KEYS);
const uint PASSES = (SPLIT_LONG + KPP - 1u) / KPP;  // passes over a split's keys, at most
const uint GROUPS = THREADS / D;               // combine: invocations a column, splitting the splits

shared float att_q[D];
shared float att_red[THREADS];
shared float att_part[PASSES * THREADS];   // each invocation's share of its keys' scores
shared float att_wt[SPLIT_LONG];           // a split's weights e^(score - max)
shared float att_acc[THREADS * 8u];        // P V's partial sums: 8 columns an invocation
shared float att_lsum[GROUPS];             // combine: each group's share of the denominator
shared float att_gmax[GROUPS];             // combine: each group's max, its shares' scale

float att_widen(uint16_t w) {
#ifdef IN_BF16
    return bf16_to_f32(uint(w));
#else
    return float(uint16BitsToHalf(w));
#endif
}
uint16_t att_narrow(float x) {
#ifdef IN_BF16
    return uint16_t(f32_to_bf16(x));
#else
    return halfBitsToUint16(float16_t(x));
#endif
}

// The workgroup's max (op 0) or sum (op 1) of v; every invocation gets it (uniform
// control flow): within subgroups first, then their results side by side.
float att_reduce(float v, uint op) {
    v = op == 0u ? subgroupMax(v) : subgroupAdd(v);
    if (gl_SubgroupInvocationID == 0u) att_red[gl_SubgroupID] = v;
    barrier();
    float r = att_red[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++) r = op == 0u ? max(r, att_red[i]) : r + att_red[i];
    barrier();
    return r;
}

// Element i of the QKV row's head at `base` rotated by the table's row pos, rounded to
// the 16-bit type: what the rope op (decode.comp's PASS 5) stores there, the same sums.
float att_rotated(uint base, uint i, uint pos) {
    const uint half_d = D / 2u, k = i % half_d;
    const float c = ATT_TAB(pos * D + k), s = ATT_TAB(pos * D + half_d + k);
    const float a = att_widen(ATT_SRC16(base + k)), b = att_widen(ATT_SRC16(base + half_d + k));
    return att_widen(att_narrow(i < half_d ? a * c - b * s : b * c + a * s));
}

// Elements c .. c+8 of key j of query head h as one 16-byte word: K (part 1) or V
// (part 2) of its KV head from the cache's row, or for the new position (j == pos)
// from the QKV row (its K rotated there where ATT_ROPE).
uvec4 att_word8(uint j, uint pos, uint h, uint c, uint part) {
    const uint dkv = ATT_KV_HEADS * D, at = h / (ATT_HEADS / ATT_KV_HEADS) * D + c;
    if (j == pos && part == 1u && ATT_ROPE) {
        uvec4 w;
        [[unroll]] for (uint e = 0; e < 4u; e++)
            w[e] = uint(att_narrow(att_rotated(ATT_HEADS * D + at - c, c + 2u * e, pos))) |
                   (uint(att_narrow(att_rotated(ATT_HEADS * D + at - c, c + 2u * e + 1u, pos))) << 16);
        return w;
    }
    return j == pos ? ATT_SRC128((ATT_HEADS * D + (part - 1u) * dkv + at) / 8u)
                    : part == 1u ? ATT_KC128((j * dkv + at) / 8u) : ATT_VC128((j * dkv + at) / 8u);
}

void att_widen8(uvec4 w, out float v[8]) {
    [[unroll]] for (uint e = 0; e < 4u; e++) {
        v[2u * e] = att_widen(uint16_t(w[e] & 0xFFFFu));
        v[2u * e + 1u] = att_widen(uint16_t(w[e] >> 16));
    }
}

// Keys a split at position pos, and the split holding pos: SPLIT_SHORT keys while a
// head's splits of that many are at most ATT_FIT, then the position's keys over ATT_FIT
// splits, at most SPLIT_LONG (decode_split.glsl).
uint att_split_keys(uint pos) { return DECODE_SPLIT_KEYS(pos, ATT_FIT, SPLIT_LONG); }
uint att_split_of(uint pos) { return DECODE_SPLIT_OF(pos, att_split_keys(pos)); }

// Every invocation: head h's split at position pos (< ATT_ROWS, split *
// att_split_keys(pos) <= pos).
void attention_split(uint h, uint split, uint pos) {
    const uint t = gl_LocalInvocationID.x, span = att_split_keys(pos), j0 = split * span;
    const uint wbase = (h * ATT_SPLITS + split) * (D + 2u);
    // Key jj of the split is read by invocations (jj % KPP) * LANES .. + LANES in pass
    // jj / KPP, 8 of its D elements each. Every K word an invocation needs (and its V
    // words, unless ATT_V_AFTER_SCORES) is loaded before any is used: the split waits on
    // memory once, not once a pass.
    const uint lane = t % LANES, slot = t / LANES, keys = min(span, pos + 1u - j0);
    uvec4 kw[PASSES], vw[PASSES];
    [[unroll]] for (uint i = 0; i < PASSES; i++) {
        const uint jj = i * KPP + slot;
        kw[i] = jj < keys ? att_word8(j0 + jj, pos, h, lane * 8u, 1u) : uvec4(0u);
#ifndef ATT_V_AFTER_SCORES
        vw[i] = jj < keys ? att_word8(j0 + jj, pos, h, lane * 8u, 2u) : uvec4(0u);
#endif
    }
    if (t < D) att_q[t] = ATT_ROPE ? att_rotated(h * D, t, pos) : att_widen(ATT_SRC16(h * D + t));
    const uint group = ATT_HEADS / ATT_KV_HEADS, dkv = ATT_KV_HEADS * D, kv = h / group * D + t;
    if (att_split_of(pos) == split && h % group == 0u && t < D) {  // the new row, by its group's first head
        ATT_KC(pos * dkv + kv) =
            ATT_ROPE ? att_narrow(att_rotated(ATT_HEADS * D + kv - t, t, pos)) : ATT_SRC16(ATT_HEADS * D + kv);
        ATT_VC(pos * dkv + kv) = ATT_SRC16(ATT_HEADS * D + dkv + kv);
    }
    barrier();
    [[unroll]] for (uint i = 0; i < PASSES; i++) {
        float k8[8];
        att_widen8(kw[i], k8);
        float s = 0.0;
        [[unroll]] for (uint e = 0; e < 8u; e++) s = fma(att_q[lane * 8u + e], k8[e], s);
        att_part[i * THREADS + t] = s;
    }
#ifdef ATT_V_AFTER_SCORES
    [[unroll]] for (uint i = 0; i < PASSES; i++) {
        const uint jj = i * KPP + slot;
        vw[i] = jj < keys ? att_word8(j0 + jj, pos, h, lane * 8u, 2u) : uvec4(0u);
    }
#endif
    barrier();
    ATT_SCORED();
    // Key t's score, its weight e^(score - max) and the split's max and sum of weights
    // as workgroup reductions (keys <= SPLIT_LONG: invocations past the split's keys
    // give -inf and 0).
    float score = -1.0 / 0.0;
    if (t < keys) {
        const uint b = (t / KPP) * THREADS + (t % KPP) * LANES;
        float s = 0.0;
        for (uint l = 0; l < LANES; l++) s += att_part[b + l];
        score = s * ATT_SCALE;
    }
    const float m = att_reduce(score, 0u);
    const float weight = t < keys ? exp(score - m) : 0.0;
    if (t < SPLIT_LONG) att_wt[t] = weight;
    const float l = att_reduce(weight, 1u);  // its barriers also order att_wt[] before P V reads it
    // P V: each invocation 8 columns over its keys, the V words already in registers.
    float o[8];
    [[unroll]] for (uint k = 0; k < 8u; k++) o[k] = 0.0;
    [[unroll]] for (uint i = 0; i < PASSES; i++) {
        const uint jj = i * KPP + slot;
        if (jj < keys) {
            float v8[8];
            att_widen8(vw[i], v8);
            const float w = att_wt[jj];
            [[unroll]] for (uint k = 0; k < 8u; k++) o[k] = fma(w, v8[k], o[k]);
        }
    }
    [[unroll]] for (uint k = 0; k < 8u; k++) att_acc[slot * D + lane * 8u + k] = o[k];
    barrier();
    if (t < D) {
        float sum = 0.0;
        for (uint g = 0; g < KPP; g++) sum += att_acc[g * D + t];
        ATT_WORK(wbase + t) = sum;
    }
    if (t == 0u) {
        ATT_WORK(wbase + D) = m;
        ATT_WORK(wbase + D + 1u) = l;
    }
}

// Every invocation: head h's splits up to position pos combined into OUT (pos >=
// ATT_ROWS: NaN). Column c = t % D, the splits shared among GROUPS invocations a column
// so that their partials are read side by side: each group's splits in one read of
// the partials, rescaled to the group's running max as they come, then the groups'.
void attention_combine(uint h, uint pos) {
    const uint t = gl_LocalInvocationID.x, c = t % D, g = t / D;
    if (pos >= ATT_ROWS) {
        if (t < D) ATT_OUT16(h * D + t) = att_narrow(uintBitsToFloat(0x7FC00000u));
        return;
    }
    const uint splits = att_split_of(pos) + 1u;
    float mx = -1.0 / 0.0, o = 0.0, l = 0.0;  // a split's max is finite: it holds a key
    for (uint s = g; s < splits; s += GROUPS) {
        const uint b = (h * ATT_SPLITS + s) * (D + 2u);
        const float ms = ATT_WORK(b + D), m = max(mx, ms), was = exp(mx - m), w = exp(ms - m);
        o = o * was + w * ATT_WORK(b + c);
        l = l * was + w * ATT_WORK(b + D + 1u);
        mx = m;
    }
    att_acc[t] = o;
    if (c == 0u) {
        att_lsum[g] = l;
        att_gmax[g] = mx;
    }
    barrier();
    if (t >= D) return;
    float m = att_gmax[0];
    for (uint i = 1u; i < GROUPS; i++) m = max(m, att_gmax[i]);
    float os = 0.0, ls = 0.0;
    for (uint i = 0; i < GROUPS; i++) {
        const float w = exp(att_gmax[i] - m);  // a group without splits: 0
        os += w * att_acc[i * D + t];
        ls += w * att_lsum[i];
    }
    ATT_OUT16(h * D + t) = att_narrow(os / ls);
}

#endif
