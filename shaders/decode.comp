#version 460
// decode.comp — the ops of a batch-1 decode step besides its products and norms,
// reading what changes per token (the token id, the position) from the plan's
// parameter words (PARAMS, host-visible: written before each replay), so that the
// step is recorded once. One workgroup size (256) for every pass:
//
// PASS 0 (embed):   OUT[c] = SRC[token * d + c] + SRC2[pos * d + c], fp32 tables and
//                   stream (the model's embeddings as torch keeps them).
// PASS 1 (attention, split): the new position's query against keys 0..pos of one
//   head, CHUNK keys a workgroup (grid: heads x splits; flash-decoding), a key row
//   read by D / 8 invocations in 16-byte loads, every K and V word of the split in
//   flight before the first is used. SRC is the
//   QKV row [q | k | v] (heads x D each, 16-bit); the caches KC, VC hold a row of
//   heads x D per position. The split that owns pos writes the new K and V rows
//   there and reads them from SRC (no other workgroup touches that row). Each
//   writes its running max, sum and unnormalised output to WORK.
// PASS 2 (attention, combine): per head, the splits' partials rescaled to one max
//   and summed: OUT (heads x D, 16-bit) = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s,
//   THREADS / D invocations a column each summing every (THREADS / D)-th split.
// PASS 3 (top-1): PARAMS[slot] = the first index of the largest of SRC's n fp32
//   values (NaN counts as largest, as torch.argmax).
// PASS 4 (attention, fused): PASS 1, then each workgroup counts itself in on its
//   head's word of COUNTERS (zeroed by the plan before each replay); the last of the
//   head's splits to arrive combines them as PASS 2 does. One dispatch, no barrier
//   between the split and the combine.
// fp32 arithmetic; 16-bit values as words (IN_BF16: bfloat16, else float16).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "spec_decode.glsl"
#include "bf16.glsl"

layout(local_size_x = 256) in;
const uint THREADS = 256u;
const uint CHUNK = 64u;      // keys per split workgroup (short contexts still spread over several)
const uint LANES = D / 8u;   // invocations a key row: 16 bytes each

layout(push_constant) uniform Params {
    uint n;      // embed: d; attention: heads; top-1: elements
    uint slot;   // the parameter word read (token for embed, pos for attention) or written (top-1)
    uint slot2;  // embed: the position's word
    uint rows;   // embed: token rows; attention: cache rows (positions)
    uint rows2;  // embed: position rows; attention: splits in WORK per head
    float scale; // attention: 1 / sqrt(D)
} p;

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
layout(binding = BINDING_SRC2) coherent buffer Counters { uint counters[]; };  // PASS 4: a word per head

float widen(uint16_t w) {
#ifdef IN_BF16
    return bf16_to_f32(uint(w));
#else
    return float(uint16BitsToHalf(w));
#endif
}
uint16_t narrow(float x) {
#ifdef IN_BF16
    return uint16_t(f32_to_bf16(x));
#else
    return halfBitsToUint16(float16_t(x));
#endif
}

const uint KPP = THREADS / LANES;             // keys a pass of the workgroup
const uint PASSES = (CHUNK + KPP - 1u) / KPP;  // passes over a split's keys
const uint GROUPS = THREADS / D;               // combine: invocations a column, splitting the splits

shared float q[D];
shared float red[THREADS];
shared uint red_i[THREADS];
shared float part[PASSES * THREADS];   // each invocation's share of its keys' scores
shared float wt[CHUNK];                // a split's weights e^(score - max)
shared float acc[THREADS * 8u];        // P V's partial sums: 8 columns an invocation
shared float lsum[GROUPS];             // combine: each group's share of the denominator
shared bool last_split;                // PASS 4: this workgroup is its head's last to arrive

// The workgroup's max (op 0) or sum (op 1) of v; every invocation gets it (uniform
// control flow): within subgroups first, then their results side by side.
float reduce(float v, uint op) {
    v = op == 0u ? subgroupMax(v) : subgroupAdd(v);
    if (gl_SubgroupInvocationID == 0u) red[gl_SubgroupID] = v;
    barrier();
    float r = red[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++) r = op == 0u ? max(r, red[i]) : r + red[i];
    barrier();
    return r;
}

void embed() {
    const uint c = gl_GlobalInvocationID.x, tok = words[p.slot], pos = words[p.slot2];
    if (c >= p.n) return;
    const bool ok = tok < p.rows && pos < p.rows2;  // the host checks; a wrong word reads nothing
    out32[c] = ok ? src32[tok * p.n + c] + src2[pos * p.n + c] : uintBitsToFloat(0x7FC00000u);
}

// Elements c .. c+8 of key j of head h as one 16-byte word: K (part 1) or V (part 2)
// from the cache's row, or for the new position (j == pos) from the QKV row.
uvec4 word8(uint j, uint pos, uint h, uint c, uint part) {
    const uint d = p.n * D, at = h * D + c;
    return j == pos ? src128[(part * d + at) / 8u] : part == 1u ? kc128[(j * d + at) / 8u] : vc128[(j * d + at) / 8u];
}

void widen8(uvec4 w, out float v[8]) {
    [[unroll]] for (uint e = 0; e < 4u; e++) {
        v[2u * e] = widen(uint16_t(w[e] & 0xFFFFu));
        v[2u * e + 1u] = widen(uint16_t(w[e] >> 16));
    }
}

void attention_split() {
    const uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, split = gl_WorkGroupID.y;
    const uint pos = words[p.slot], d = p.n * D, j0 = split * CHUNK;
    const uint wbase = (h * p.rows2 + split) * (D + 2u);
    if (pos >= p.rows || j0 > pos) return;  // past the cache, or past the keys: the combine skips it
    // Key jj of the split is read by invocations (jj % KPP) * LANES .. + LANES in pass
    // jj / KPP, 8 of its D elements each. Every K and V word an invocation needs is
    // loaded before any is used: the split waits on memory once, not once a pass.
    const uint lane = t % LANES, slot = t / LANES, keys = min(CHUNK, pos + 1u - j0);
    uvec4 kw[PASSES], vw[PASSES];
    [[unroll]] for (uint i = 0; i < PASSES; i++) {
        const uint jj = i * KPP + slot;
        kw[i] = jj < keys ? word8(j0 + jj, pos, h, lane * 8u, 1u) : uvec4(0u);
        vw[i] = jj < keys ? word8(j0 + jj, pos, h, lane * 8u, 2u) : uvec4(0u);
    }
    if (t < D) q[t] = widen(src16[h * D + t]);
    if (pos / CHUNK == split && t < D) {  // the new row, for the tokens after this one
        kc[pos * d + h * D + t] = src16[d + h * D + t];
        vc[pos * d + h * D + t] = src16[2u * d + h * D + t];
    }
    barrier();
    [[unroll]] for (uint i = 0; i < PASSES; i++) {
        float k8[8];
        widen8(kw[i], k8);
        float s = 0.0;
        [[unroll]] for (uint e = 0; e < 8u; e++) s = fma(q[lane * 8u + e], k8[e], s);
        part[i * THREADS + t] = s;
    }
    barrier();
    // Key t's score, its weight e^(score - max) and the split's max and sum of weights
    // as workgroup reductions (keys <= CHUNK: invocations past the split's keys give
    // -inf and 0).
    float score = -1.0 / 0.0;
    if (t < keys) {
        const uint b = (t / KPP) * THREADS + (t % KPP) * LANES;
        float s = 0.0;
        for (uint l = 0; l < LANES; l++) s += part[b + l];
        score = s * p.scale;
    }
    const float m = reduce(score, 0u);
    const float weight = t < keys ? exp(score - m) : 0.0;
    if (t < CHUNK) wt[t] = weight;
    const float l = reduce(weight, 1u);  // its barriers also order wt[] before P V reads it
    // P V: each invocation 8 columns over its keys, the V words already in registers.
    float o[8];
    [[unroll]] for (uint k = 0; k < 8u; k++) o[k] = 0.0;
    [[unroll]] for (uint i = 0; i < PASSES; i++) {
        const uint jj = i * KPP + slot;
        if (jj < keys) {
            float v8[8];
            widen8(vw[i], v8);
            const float w = wt[jj];
            [[unroll]] for (uint k = 0; k < 8u; k++) o[k] = fma(w, v8[k], o[k]);
        }
    }
    [[unroll]] for (uint k = 0; k < 8u; k++) acc[slot * D + lane * 8u + k] = o[k];
    barrier();
    if (t < D) {
        float sum = 0.0;
        for (uint g = 0; g < KPP; g++) sum += acc[g * D + t];
        work[wbase + t] = sum;
    }
    if (t == 0u) {
        work[wbase + D] = m;
        work[wbase + D + 1u] = l;
    }
}

// Column c = t % D of head h, the splits shared among GROUPS invocations a column so
// that their partials are read side by side.
void attention_combine() {
    const uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, pos = words[p.slot];
    const uint c = t % D, g = t / D;
    if (pos >= p.rows) {
        if (t < D) out16[h * D + t] = narrow(uintBitsToFloat(0x7FC00000u));
        return;
    }
    const uint splits = pos / CHUNK + 1u;
    float mx = -1.0 / 0.0;
    for (uint s = t; s < splits; s += THREADS) mx = max(mx, work[(h * p.rows2 + s) * (D + 2u) + D]);
    mx = reduce(mx, 0u);
    float o = 0.0, l = 0.0;
    for (uint s = g; s < splits; s += GROUPS) {
        const uint b = (h * p.rows2 + s) * (D + 2u);
        const float w = exp(work[b + D] - mx);
        o += w * work[b + c];
        l += w * work[b + D + 1u];
    }
    acc[t] = o;
    if (c == 0u) lsum[g] = l;
    barrier();
    if (t >= D) return;
    float os = 0.0, ls = 0.0;
    for (uint i = 0; i < GROUPS; i++) {
        os += acc[i * D + t];
        ls += lsum[i];
    }
    out16[h * D + t] = narrow(os / ls);
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
    attention_combine();
}

// a beats b: larger, or NaN over a number, or equal and earlier
bool beats(float a, uint ia, float b, uint ib) {
    if (isnan(a) != isnan(b)) return isnan(a);
    return a > b || (a == b && ia < ib) || (isnan(a) && ia < ib);
}

void top1() {
    const uint t = gl_LocalInvocationID.x;
    float best = -1.0 / 0.0;
    uint bi = 0xFFFFFFFFu;
    for (uint i = t; i < p.n; i += THREADS)
        if (bi == 0xFFFFFFFFu || beats(src32[i], i, best, bi)) {
            best = src32[i];
            bi = i;
        }
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
    if (t == 0u) words[p.slot] = red_i[0];
}

void main() {
    if (PASS == 0u)
        embed();
    else if (PASS == 1u)
        attention_split();
    else if (PASS == 2u)
        attention_combine();
    else if (PASS == 3u)
        top1();
    else
        attention_fused();
}
