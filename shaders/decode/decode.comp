#version 460
// decode.comp — the ops of a batch-1 decode step besides its products and norms,
// reading what changes per token (the token id, the position) from the plan's
// parameter words (PARAMS, host-visible: written before each replay), so that the
// step is recorded once. One workgroup size (256) for every pass:
//
// PASS 0 (embed):   OUT[c] = SRC[token * d + c] + SRC2[pos * d + c], fp32 tables and
//                   stream (the model's embeddings as torch keeps them); no SRC2 term
//                   where the position table has no rows (a model without one); the
//                   token table 16-bit where EMBED_TABLE16 (the pass's dtype), widened.
// PASS 1 (attention, split): one head's split of keys a workgroup (grid: heads x
//   splits of the shorter size; decode_attention.glsl, which a persistent run's
//   attention shares).
//   SRC is the QKV row, KC and VC the caches, WORK the splits' partials; where the
//   view's rope word is set, q and the new k are rotated as PASS 5 would (TAB its table).
// PASS 2 (attention, combine): per head, the splits' partials combined into OUT.
// PASS 3 (top-1): PARAMS[slot] = the first index of the largest of SRC's n fp32
//   values (NaN counts as largest, as torch.argmax): a chunk a workgroup, the last of
//   them to arrive on COUNTERS (zeroed before each replay) reducing their picks.
// PASS 4 (attention, fused): PASS 1, then each workgroup counts itself in on its
//   head's word of COUNTERS (zeroed by the plan before each replay); the last of the
//   head's splits to arrive combines them as PASS 2 does. One dispatch, no barrier
//   between the split and the combine.
// PASS 5 (rope): rotary positions on the q heads and then the k heads of the QKV row
//   KC (16-bit, in place), at pos = PARAMS[slot]: for each head's pair (i, i + D/2),
//   with c, s = SRC2[pos * D + i], SRC2[pos * D + D/2 + i] (the host's cos and sin
//   table), x_i = x_i c - x_{i+D/2} s and x_{i+D/2} = x_{i+D/2} c + x_i s (Llama's
//   rotate_half). A position past the table leaves the row as it was (the host checks).
// PASS 6 (swiglu): OUT16[i] = silu(g_i) u_i for the row SRC16 = [g | u] of 2n values.
// fp32 arithmetic; 16-bit values as words (IN_BF16: bfloat16, else float16).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "spec_decode.glsl"
#include "../common/bf16.glsl"

layout(local_size_x = 256) in;

#include "push_decode.glsl"  // the push words (shaders/layouts.py)

layout(binding = BINDING_PARAMS) buffer Words { uint words[]; };
layout(binding = BINDING_SRC) readonly buffer Src32 { float src32[]; };
layout(binding = BINDING_SRC) readonly buffer Src16 { uint16_t src16[]; };
layout(binding = BINDING_SRC) readonly buffer Src128 { uvec4 src128[]; };
layout(binding = BINDING_SRC2) readonly buffer Src2 { float src2[]; };
layout(binding = BINDING_KC) buffer KCache { uint16_t kc[]; };
layout(binding = BINDING_VC) buffer VCache { uint16_t vc[]; };
layout(binding = BINDING_KC) readonly buffer KCache128 { uvec4 kc128[]; };
layout(binding = BINDING_VC) readonly buffer VCache128 { uvec4 vc128[]; };
layout(binding = BINDING_OUT) writeonly buffer Out32 { float out32[]; };
layout(binding = BINDING_OUT) writeonly buffer Out16 { uint16_t out16[]; };
layout(binding = BINDING_WORK) coherent buffer Work { float work[]; };  // coherent: PASS 4 reads other workgroups' partials
layout(binding = BINDING_SRC2) coherent buffer Counters { uint counters[]; };  // PASS 4: a word per head; PASS 3: arrivals, picks
layout(binding = BINDING_TAB) readonly buffer Tab { float tab[]; };  // PASSES 1, 4: the rope's cos and sin

#define ATT_HEADS p.n
#define EMBED_TABLE16 p.fit  // the embed view's word 6 (shaders/layouts.py)
#define ATT_KV_HEADS p.slot2
#define ATT_ROWS p.rows
#define ATT_SPLITS p.rows2
#define ATT_SCALE p.scale
#define ATT_ROPE (ROPE != 0u && p.rope != 0u)  // ROPE 0: the path compiled out (no rope fused in)
#define ATT_TAB(i) tab[i]
#define ATT_FIT p.fit
#define ATT_SRC16(i) src16[i]
#define ATT_SRC128(i) src128[i]
#define ATT_KC(i) kc[i]
#define ATT_VC(i) vc[i]
#define ATT_KC128(i) kc128[i]
#define ATT_VC128(i) vc128[i]
#define ATT_WORK(i) work[i]
#define ATT_OUT16(i) out16[i]
#include "decode_attention.glsl"

shared float red[THREADS];
shared uint red_i[THREADS];
shared bool last_split;  // PASS 4: this workgroup is its head's last to arrive (PASS 3: the grid's)

void embed() {
    const uint c = gl_GlobalInvocationID.x, tok = words[p.slot], pos = words[p.slot2];
    if (c >= p.n) return;
    const bool ok = tok < p.rows && (p.rows2 == 0u || pos < p.rows2);  // the host checks; a wrong word reads nothing
    const float at_pos = p.rows2 == 0u ? 0.0 : src2[pos * p.n + c];  // no position table: rotary positions later
    const float at_tok = EMBED_TABLE16 != 0u ? att_widen(src16[tok * p.n + c]) : src32[tok * p.n + c];
    out32[c] = ok ? at_tok + at_pos : uintBitsToFloat(0x7FC00000u);
}

// Grid: heads x splits of the shorter size; a split past the cache or past the keys
// writes nothing (the combine skips it).
void attention_split() {
    const uint pos = words[p.slot], h = gl_WorkGroupID.x, split = gl_WorkGroupID.y;
    if (pos < p.rows && split <= att_split_of(pos)) attention_split(h, split, pos);
}

// Every workgroup of the grid counts in, those with no keys too, so the last to arrive
// knows that each split's partials are written.
void attention_fused() {
    attention_split();
    memoryBarrierBuffer();  // this workgroup's partials, before its arrival is counted
    barrier();
    if (gl_LocalInvocationID.x == 0u)
        last_split = atomicAdd(counters[gl_WorkGroupID.x], 1u) == gl_NumWorkGroups.y - 1u;
    barrier();
    if (!last_split) return;
    memoryBarrierBuffer();  // the other splits' partials, after their arrivals
    attention_combine(gl_WorkGroupID.x, words[p.slot]);
}

void rope() {
    const uint g = gl_GlobalInvocationID.x, half_d = D / 2u, pos = words[p.slot];
    if (g >= (p.n + p.slot2) * half_d || pos >= p.rows) return;
    const uint at = g / half_d * D + g % half_d, i = g % half_d;
    const float c = src2[pos * D + i], s = src2[pos * D + half_d + i];
    const float a = att_widen(kc[at]), b = att_widen(kc[at + half_d]);
    kc[at] = att_narrow(a * c - b * s);
    kc[at + half_d] = att_narrow(b * c + a * s);
}

void swiglu() {
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    const float g = att_widen(src16[i]), u = att_widen(src16[p.n + i]);
    out16[i] = att_narrow(g / (1.0 + exp(-g)) * u);
}

// a beats b: larger, or NaN over a number, or equal and earlier
bool beats(float a, uint ia, float b, uint ib) {
    if (isnan(a) != isnan(b)) return isnan(a);
    return a > b || (a == b && ia < ib) || (isnan(a) && ia < ib);
}

// The workgroup's first largest of the (value, index) pairs its invocations hold (index
// ~0: none), in red[0] and red_i[0]; every invocation calls it.
void top1_workgroup(float best, uint bi) {
    const uint t = gl_LocalInvocationID.x;
    red[t] = best;
    red_i[t] = bi;
    barrier();
    for (uint s = THREADS / 2u; s > 0u; s >>= 1) {
        if (t < s && red_i[t + s] != 0xFFFFFFFFu &&
            (red_i[t] == 0xFFFFFFFFu || beats(red[t + s], red_i[t + s], red[t], red_i[t]))) {
            red[t] = red[t + s];
            red_i[t] = red_i[t + s];
        }
        barrier();
    }
}

// Each workgroup its chunk of p.slot2 values, four loads an invocation in flight at once;
// with more than one workgroup, each one's pick goes to its TOP1_PICK words from
// COUNTERS[TOP1_PICKS] and counts in on COUNTERS[TOP1_ARRIVALS], and the last to arrive
// reduces the picks. Any order gives the same pick: `beats` is a total order on (value,
// index).
const uint TOP1_LOADS = 4u, TOP1_BLOCK = THREADS * TOP1_LOADS;
void top1() {
    const uint t = gl_LocalInvocationID.x, w = gl_WorkGroupID.x, lo = w * p.slot2, hi = min(p.n, lo + p.slot2);
    float best = -1.0 / 0.0;
    uint bi = 0xFFFFFFFFu;
    for (uint b = lo; b < hi; b += TOP1_BLOCK) {
        float v[TOP1_LOADS];
        [[unroll]] for (uint k = 0; k < TOP1_LOADS; k++) {
            const uint i = b + k * THREADS + t;
            v[k] = i < hi ? src32[i] : 0.0;
        }
        [[unroll]] for (uint k = 0; k < TOP1_LOADS; k++) {
            const uint i = b + k * THREADS + t;
            if (i < hi && (bi == 0xFFFFFFFFu || beats(v[k], i, best, bi))) {
                best = v[k];
                bi = i;
            }
        }
    }
    top1_workgroup(best, bi);
    if (gl_NumWorkGroups.x == 1u) {
        if (t == 0u) words[p.slot] = red_i[0];
        return;
    }
    if (t == 0u) {
        counters[TOP1_PICKS + TOP1_PICK * w] = floatBitsToUint(red[0]);
        counters[TOP1_PICKS + TOP1_PICK * w + 1u] = red_i[0];
    }
    memoryBarrierBuffer();  // this workgroup's pair, before its arrival is counted
    barrier();
    if (t == 0u) last_split = atomicAdd(counters[TOP1_ARRIVALS], 1u) == gl_NumWorkGroups.x - 1u;
    barrier();
    if (!last_split) return;
    memoryBarrierBuffer();  // the other workgroups' pairs, after their arrivals
    best = -1.0 / 0.0;
    bi = 0xFFFFFFFFu;
    for (uint g = t; g < gl_NumWorkGroups.x; g += THREADS) {
        const float v = uintBitsToFloat(counters[TOP1_PICKS + TOP1_PICK * g]);
        const uint i = counters[TOP1_PICKS + TOP1_PICK * g + 1u];
        if (bi == 0xFFFFFFFFu || beats(v, i, best, bi)) {
            best = v;
            bi = i;
        }
    }
    top1_workgroup(best, bi);
    if (t == 0u) words[p.slot] = red_i[0];
}

void main() {
    if (PASS == 0u)
        embed();
    else if (PASS == 1u)
        attention_split();
    else if (PASS == 2u)
        attention_combine(gl_WorkGroupID.x, words[p.slot]);
    else if (PASS == 3u)
        top1();
    else if (PASS == 4u)
        attention_fused();
    else if (PASS == 5u)
        rope();
    else
        swiglu();
}
