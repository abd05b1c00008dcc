// matmul_gemv.glsl — the matrix-vector kernel's body (matmul_gemv.comp describes it),
// shared with matmul_gemv_ln.comp, which adds a LayerNorm tail.
#include "matmul_common.glsl"

const uint NSG = gl_WorkGroupSize.x / SUBGROUP;  // subgroups per workgroup (THREADS_X)
const uint UNROLL = 4u;                 // 16-byte loads of B in flight per lane (TRANS_B)

shared float partial[NSG * ROWS * SUBGROUP];  // B as K x N: each subgroup's partial sums

uint abase, bbase;

#ifdef STAGE_SYNC
#include "stage_sync.glsl"
// A as a plan's waiting stage reads it: the stage before may have just written it.
layout(binding = BINDING_A) coherent readonly buffer A16Coherent { uint16_t a16_coherent[]; };
layout(binding = BINDING_A) coherent readonly buffer A128Coherent { uvec4 a128_coherent[]; };
const uint A_STAGED = 8192u;           // elements of A a workgroup reads once into shared memory
shared uvec4 a_stage[A_STAGED / 8u];  // the workgroup's rows of A, K elements each
bool a_staged;                        // A's rows are in a_stage (a_stage_rows)

// Rows m0 .. m0+ROWS of A into a_stage, where A's rows are whole 16-byte words and fit
// (variant.c's GEMV_A_STAGED counts it): every invocation, uniform control flow.
void a_stage_rows(uint m0) {
    a_staged = !TRANS_A && (p.flags & FLAG_A_VEC) != 0u && p.K % 8u == 0u && p.M * p.K <= A_STAGED;
    if (!a_staged) return;
    const uint words = p.K / 8u, rows = min(ROWS, p.M - m0);
    for (uint i = gl_LocalInvocationIndex; i < rows * words; i += gl_WorkGroupSize.x)
        a_stage[i] = a128_coherent[(abase + (m0 + i / words) * p.lda) / 8u + i % words];
    barrier();
}
#else
bool stage_early() { return true; }
void stage_wait() {}
void a_stage_rows(uint m0) {}
#endif

float widen1(uint bits) {
#ifdef IN_BF16
    return bf16_to_f32(bits);
#else
    return unpackHalf2x16(bits).x;
#endif
}

float a_at(uint r, uint k) {
    const uint i = abase + (TRANS_A ? k * p.lda + r : r * p.lda + k);
#ifdef STAGE_SYNC
    if (a_staged) {
        const uint e = a_stage[((r - gl_WorkGroupID.y * ROWS) * p.K + k) / 8u][(k % 8u) / 2u];
        return widen1((k % 2u) == 0u ? e & 0xFFFFu : e >> 16);
    }
    if (p.sync_wait != 0u) return widen1(uint(a16_coherent[i]));
#endif
    return in_a(i);
}

// The 16-byte word of A at element i (of a row of whole words).
uvec4 a_word(uint i) {
#ifdef STAGE_SYNC
    if (p.sync_wait != 0u) return a128_coherent[i / 8u];
#endif
    return a128[i / 8u];
}

// Eight 16-bit elements (one 16-byte word) as fp32.
void widen8(uvec4 w, out float v[8]) {
    [[unroll]] for (uint j = 0; j < 4u; j++) {
#ifdef IN_BF16
        v[2u * j] = bf16_to_f32(w[j] & 0xFFFFu);
        v[2u * j + 1u] = bf16_to_f32(w[j] >> 16);
#else
        const vec2 h = unpackHalf2x16(w[j]);
        v[2u * j] = h.x;
        v[2u * j + 1u] = h.y;
#endif
    }
}

// acc[r] += A[m0 + r, k .. k+8) . b[0..8), for the rows that exist.
void fma8(inout float acc[ROWS], uint m0, uint k, float b[8]) {
    const bool a_vec = !TRANS_A && (p.flags & FLAG_A_VEC) != 0u;
    [[unroll]] for (uint r = 0; r < ROWS; r++) {
        if (m0 + r >= p.M) break;
        float a[8];
#ifdef STAGE_SYNC
        if (a_staged) {
            widen8(a_stage[(r * p.K + k) / 8u], a);
        } else
#endif
        if (a_vec) {
            widen8(a_word(abase + (m0 + r) * p.lda + k), a);
        } else {
            [[unroll]] for (uint j = 0; j < 8u; j++) a[j] = a_at(m0 + r, k + j);
        }
        [[unroll]] for (uint j = 0; j < 8u; j++) acc[r] = fma(a[j], b[j], acc[r]);
    }
}

void store_rows(float acc[ROWS], uint m0, uint n) {
    const uint cbase = gl_WorkGroupID.z * p.M * p.N;
    [[unroll]] for (uint r = 0; r < ROWS; r++) {
        if (m0 + r >= p.M) break;
        const uint ci = cbase + (m0 + r) * p.N + n;
        store_c(ci, epilogue(acc[r], ci, n));
    }
}

// B as N x K: the subgroup's column n, lanes along K. Every invocation calls it (the
// wait and A's staging are workgroup-wide); a subgroup past N returns after them.
void rows_of_b(uint m0) {
    const uint n = gl_WorkGroupID.x * NSG + gl_SubgroupID;
    const uint lane = gl_SubgroupInvocationID;
    const uint row = bbase + n * p.ldb;
    const uint words = p.K / 8u, step = SUBGROUP * UNROLL;
    // Whole 8-element words of B: UNROLL per lane per step, then one per lane. The
    // first step's are loaded before a plan's wait where nothing in the plan writes B.
    const bool b_vec = (p.flags & FLAG_B_VEC) != 0u, first = n < p.N && b_vec && step <= words;
    uvec4 bw[UNROLL];
    if (first && stage_early())
        [[unroll]] for (uint u = 0; u < UNROLL; u++) bw[u] = b128[row / 8u + u * SUBGROUP + lane];
    stage_wait();
    if (first && !stage_early())
        [[unroll]] for (uint u = 0; u < UNROLL; u++) bw[u] = b128[row / 8u + u * SUBGROUP + lane];
    a_stage_rows(m0);
    if (n >= p.N) return;  // a whole subgroup: no barrier below
    float acc[ROWS];
    [[unroll]] for (uint r = 0; r < ROWS; r++) acc[r] = 0.0;
    uint k = 0;
    if (b_vec) {
        uint w = 0;
        while (first) {
            [[unroll]] for (uint u = 0; u < UNROLL; u++) {
                float b[8];
                widen8(bw[u], b);
                fma8(acc, m0, (w + u * SUBGROUP + lane) * 8u, b);
            }
            w += step;
            if (w + step > words) break;
            [[unroll]] for (uint u = 0; u < UNROLL; u++) bw[u] = b128[row / 8u + w + u * SUBGROUP + lane];
        }
        for (uint i = w + lane; i < words; i += SUBGROUP) {
            float b[8];
            widen8(b128[row / 8u + i], b);
            fma8(acc, m0, i * 8u, b);
        }
        k = words * 8u;
    }
    for (uint i = k + lane; i < p.K; i += SUBGROUP) {
        const float b = in_b(row + i);
        [[unroll]] for (uint r = 0; r < ROWS; r++)
            if (m0 + r < p.M) acc[r] = fma(a_at(m0 + r, i), b, acc[r]);
    }
    [[unroll]] for (uint r = 0; r < ROWS; r++) acc[r] = subgroupAdd(acc[r]);
    if (lane == 0u) store_rows(acc, m0, n);
}

// B as K x N: a lane per column, the subgroups taking every NSG-th k.
void cols_of_b(uint m0) {
    stage_wait();
    a_stage_rows(m0);
    const uint lane = gl_LocalInvocationID.x % SUBGROUP, sg = gl_LocalInvocationID.x / SUBGROUP;
    const uint n = gl_WorkGroupID.x * SUBGROUP + lane;
    float acc[ROWS];
    [[unroll]] for (uint r = 0; r < ROWS; r++) acc[r] = 0.0;
    if (n < p.N) {
        for (uint k = sg; k < p.K; k += NSG) {
            const float b = in_b(bbase + k * p.ldb + n);
            [[unroll]] for (uint r = 0; r < ROWS; r++)
                if (m0 + r < p.M) acc[r] = fma(a_at(m0 + r, k), b, acc[r]);
        }
    }
    [[unroll]] for (uint r = 0; r < ROWS; r++) partial[(sg * ROWS + r) * SUBGROUP + lane] = acc[r];
    barrier();
    if (sg != 0u || n >= p.N) return;
    [[unroll]] for (uint r = 0; r < ROWS; r++) {
        float s = 0.0;
        for (uint g = 0; g < NSG; g++) s += partial[(g * ROWS + r) * SUBGROUP + lane];
        acc[r] = s;
    }
    store_rows(acc, m0, n);
}

#ifdef LN_TAIL
#include "matmul_gemv_ln_tail.glsl"
#endif

void main() {
    abase = gl_WorkGroupID.z * p.sa;
    bbase = gl_WorkGroupID.z * p.sb;
    const uint m0 = gl_WorkGroupID.y * ROWS;
    if (TRANS_B)
        rows_of_b(m0);
    else
        cols_of_b(m0);
#ifdef LN_TAIL
    ln_tail();
#endif
#ifdef STAGE_SYNC
    stage_signal();
#endif
}
