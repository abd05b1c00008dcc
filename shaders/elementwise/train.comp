#version 460
// train.comp — the ops of a training step besides products, attention, LayerNorm and
// the optimizer, one PASS each (fp32 arithmetic; int32 token ids):
//   0 embedding: DST[r, c] = SRC[IDS[r], c] + SRC2[r % seq, c] (fp32 tables and rows;
//     rows x n elements, one an invocation; an id outside the table: a NaN row)
//   1 the token table's gradient: DST[v, c] (+)= the sum over rows r with IDS[r] == v,
//     in increasing r, of SRC[r, c] (a workgroup a table row v; deterministic: no
//     atomics on values)
//   2 the position table's gradient: DST[t, c] (+)= sum over b of SRC[b seq + t, c]
//   3 cross-entropy: a workgroup a row r of 16-bit logits SRC (n classes, IN_BF16):
//     DST[r] = logsumexp(row) - row[IDS[r]] (fp32), and AUX = the row's gradient
//     (softmax(row) - onehot(IDS[r])) * scale, 16-bit (AUX may be SRC itself: each
//     element is read, then written by the invocation that read it)
//   4 column sums: DST[dst_off + c] (+)= scale * sum over r < rows of SRC[r ld + off + c]
//     (fp32)
//   5 sums of squares: DST[dst_off + w] = sum of SRC[i]^2 over the rows elements of
//     workgroup w's chunk of SQ_CHUNK (fp32: a gradient norm's partial sums, in order)
//   6 rotary positions on rows of 16-bit heads, in place (AUX): in each of `rows` rows
//     (ld elements apart), the first n heads of seq elements, row r at position off + r:
//     each pair (i, i + seq/2) turned by the angle whose cos and sin are
//     SRC2[pos, i] and SRC2[pos, seq/2 + i] (Llama's rotate_half)
//   7 SwiGLU on rows: AUX[r, i] = silu(SRC[r, i]) SRC[r, n + i] over rows x n, 16-bit,
//     the source's rows ld elements apart
// The embedding's flags: 1 the token table is 16-bit (IN's type, widened exactly), 2
// there is no position table.
// "(+)=": accumulate != 0 adds to what DST holds.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#include "spec_train.glsl"
#include "../common/bf16.glsl"

layout(local_size_x = 256) in;

#include "push_train.glsl"  // the push words (shaders/layouts.py)

layout(binding = BINDING_IDS) readonly buffer Ids { int ids[]; };
layout(binding = BINDING_SRC) readonly buffer Src { float src[]; };
layout(binding = BINDING_SRC) readonly buffer Src16 { uint16_t src16[]; };
layout(binding = BINDING_SRC2) readonly buffer Src2 { float src2[]; };
layout(binding = BINDING_DST) buffer Dst { float dst[]; };
layout(binding = BINDING_AUX) writeonly buffer Aux16 { uint16_t aux16[]; };
layout(binding = BINDING_AUX) buffer AuxRW { uint16_t auxrw[]; };

#define NAN uintBitsToFloat(0x7FC00000u)

shared uint hits;
shared uint hit[256];
shared float red[256];

uint flat_group() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }
uint flat_index() { return flat_group() * 256u + gl_LocalInvocationID.x; }

void put(uint i, float v) { dst[i] = p.accumulate != 0u ? dst[i] + v : v; }

float widen16(uint16_t w) {
#ifdef IN_BF16
    return bf16_to_f32(uint(w));
#else
    return float(uint16BitsToFloat16(w));
#endif
}

float logit(uint i) { return widen16(src16[i]); }

uint16_t to16(float v) {
#ifdef IN_BF16
    return uint16_t(f32_to_bf16(v));
#else
    return float16BitsToUint16(float16_t(v));
#endif
}

void embed() {
    const uint i = flat_index();
    if (i >= p.rows * p.n) return;
    const uint r = i / p.n, c = i - r * p.n, id = uint(ids[r]);
    const float tok = (p.flags & 1u) != 0u ? widen16(src16[id * p.n + c]) : src[id * p.n + c];
    const float pos = (p.flags & 2u) != 0u ? 0.0 : src2[(r % p.seq) * p.n + c];
    dst[i] = id < p.table_rows ? tok + pos : NAN;
}

// Rows whose id is this workgroup's table row, 256 ids at a time: each invocation
// tests one and flags a hit; where a chunk has any, every invocation adds the flagged
// rows in increasing order over its columns.
void token_grad() {
    const uint v = flat_group(), t = gl_LocalInvocationID.x;
    if (v >= p.table_rows) return;  // uniform over the workgroup
    const uint cols = (p.n + 255u) / 256u;
    float acc[MAX_COLS];
    for (uint j = 0u; j < MAX_COLS; j++) acc[j] = 0.0;
    for (uint base = 0u; base < p.rows; base += 256u) {
        if (t == 0u) hits = 0u;
        barrier();
        const uint r = base + t;
        const bool mine = r < p.rows && uint(ids[r]) == v;
        hit[t] = mine ? 1u : 0u;
        if (mine) atomicAdd(hits, 1u);
        barrier();
        if (hits != 0u) {
            const uint end = min(256u, p.rows - base);
            for (uint k = 0u; k < end; k++) {
                if (hit[k] == 0u) continue;
                const uint row = (base + k) * p.n;
                for (uint j = 0u; j < cols; j++) {
                    const uint c = t + 256u * j;
                    if (c < p.n) acc[j] += src[row + c];
                }
            }
        }
        barrier();
    }
    for (uint j = 0u; j < cols; j++) {
        const uint c = t + 256u * j;
        if (c < p.n) put(v * p.n + c, acc[j]);
    }
}

void position_grad() {
    const uint i = flat_index();
    if (i >= p.seq * p.n) return;
    const uint t = i / p.n, c = i - t * p.n;
    float acc = 0.0;
    for (uint r = t; r < p.rows; r += p.seq) acc += src[r * p.n + c];
    put(i, acc);
}

// The workgroup's max (op 0) or sum (op 1) of each invocation's v.
float reduce(float v, uint op) {
    const uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (t < s) red[t] = op == 0u ? max(red[t], red[t + s]) : red[t] + red[t + s];
        barrier();
    }
    const float total = red[0];
    barrier();
    return total;
}

void cross_entropy() {
    const uint r = flat_group(), t = gl_LocalInvocationID.x;
    if (r >= p.rows) return;
    const uint row = r * p.n, target = uint(ids[r]);
    float m = -1.0 / 0.0;
    for (uint c = t; c < p.n; c += 256u) m = max(m, logit(row + c));
    m = reduce(m, 0u);
    float s = 0.0;
    for (uint c = t; c < p.n; c += 256u) s += exp(logit(row + c) - m);
    s = reduce(s, 1u);
    const float lse = target < p.n ? m + log(s) : NAN;  // a target outside the classes: a NaN row
    if (t == 0u) dst[r] = lse - logit(row + min(target, p.n - 1u));
    for (uint c = t; c < p.n; c += 256u) {
        const float prob = exp(logit(row + c) - lse);
        aux16[row + c] = to16((prob - (c == target ? 1.0 : 0.0)) * p.scale);
    }
}

// 16 columns a workgroup, 16 invocations a column each summing every 16th row, then
// the 16 partial sums added in a fixed order: deterministic, and a few hundred rows
// a column run wide (a LayerNorm's partial sums are rows / 8 of them).
void column_sum() {
    const uint t = gl_LocalInvocationID.x, col = t & 15u, lane = t >> 4u;
    const uint c = flat_group() * 16u + col;
    float acc = 0.0;
    if (c < p.n)
        for (uint r = lane; r < p.rows; r += 16u) acc += src[r * p.ld + p.off + c];
    red[t] = acc;
    barrier();
    for (uint s = 8u; s > 0u; s >>= 1u) {
        if (lane < s) red[t] += red[t + 16u * s];
        barrier();
    }
    if (lane == 0u && c < p.n) put(p.dst_off + c, red[t] * p.scale);
}

const uint SQ_CHUNK = 4096u;

void sum_squares() {
    const uint w = flat_group(), t = gl_LocalInvocationID.x;
    if (w * SQ_CHUNK >= p.rows) return;  // uniform over the workgroup
    const uint end = min(p.rows, (w + 1u) * SQ_CHUNK);
    float acc = 0.0;
    for (uint i = w * SQ_CHUNK + t; i < end; i += 256u) acc += src[i] * src[i];
    acc = reduce(acc, 1u);
    if (t == 0u) dst[p.dst_off + w] = acc;
}

void rope_rows() {
    const uint g = flat_index(), half_d = p.seq / 2u, per_row = p.n * half_d;
    if (g >= p.rows * per_row) return;
    const uint r = g / per_row, k = g - r * per_row, i = k % half_d;
    const uint at = r * p.ld + k / half_d * p.seq + i, pos = p.off + r;
    const float c = src2[pos * p.seq + i], s = src2[pos * p.seq + half_d + i];
    const float a = widen16(auxrw[at]), b = widen16(auxrw[at + half_d]);
    auxrw[at] = to16(a * c - b * s);
    auxrw[at + half_d] = to16(b * c + a * s);
}

void swiglu_rows() {
    const uint g = flat_index();
    if (g >= p.rows * p.n) return;
    const uint r = g / p.n, i = g - r * p.n;
    const float x = widen16(src16[r * p.ld + i]), u = widen16(src16[r * p.ld + p.n + i]);
    aux16[g] = to16(x / (1.0 + exp(-x)) * u);
}

void main() {
    if (PASS == 0u) embed();
    else if (PASS == 1u) token_grad();
    else if (PASS == 2u) position_grad();
    else if (PASS == 3u) cross_entropy();
    else if (PASS == 4u) column_sum();
    else if (PASS == 5u) sum_squares();
    else if (PASS == 6u) rope_rows();
    else swiglu_rows();
}
