// matmul_gemv.glsl — the matrix-vector kernel's body (matmul_gemv.comp describes it),
// shared with matmul_gemv_ln.comp, which adds a LayerNorm head (LN_HEAD), and with
// matmul_gemv_persist.comp, which runs products one after another (PERSIST, with LN_HEAD).
#include "../matmul/matmul_common.glsl"
#ifdef LN_HEAD
#include "matmul_gemv_ln_head.glsl"
#endif

const uint NSG = gl_WorkGroupSize.x / SUBGROUP;  // subgroups per workgroup (THREADS_X)
const uint UNROLL = 4u;                 // 16-byte loads of B in flight per lane (TRANS_B)

shared float partial[NSG * ROWS * SUBGROUP];  // B as K x N: each subgroup's partial sums

uint abase, bbase;
uvec4 bw[UNROLL];    // B as N x K: the step's weight words
bool ahead = false;  // bw already holds the column's first step (LN_HEAD)

float a_at(uint r, uint k) { return in_a(abase + (TRANS_A ? k * p.lda + r : r * p.lda + k)); }

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

// FLAG_A_SWIGLU: an element of A, silu(g) u, rounded to A's type as the SwiGLU op stores
// it; one formula for the kernel apart and for a run's staging (persist_stage_a).
float swiglu_rounded(float g, float u) {
    const float v = g / (1.0 + exp(-g)) * u;
#ifdef IN_BF16
    return round_bf16(v);
#else
    return round_f16(v);
#endif
}

#ifndef LN_HEAD
// FLAG_A_SWIGLU (one row): A's elements k .. k+8 are silu(g) u of the bound row [g | u]
// of 2K.
void swiglu_a8(uint k, out float a[8]) {
    float g[8], u[8];
    widen8(a128[(abase + k) / 8u], g);
    widen8(a128[(abase + p.K + k) / 8u], u);
    [[unroll]] for (uint j = 0; j < 8u; j++) a[j] = swiglu_rounded(g[j], u[j]);
}
#endif

// acc[r] += A[m0 + r, k .. k+8) . b[0..8), for the rows that exist.
void fma8(inout float acc[ROWS], uint m0, uint k, float b[8]) {
    const bool a_vec = !TRANS_A && (p.flags & FLAG_A_VEC) != 0u;
    [[unroll]] for (uint r = 0; r < ROWS; r++) {
        if (m0 + r >= p.M) break;
        float a[8];
#ifdef LN_HEAD
        ln_a8(k, a);
#else
        if ((p.flags & FLAG_A_SWIGLU) != 0u) {
            swiglu_a8(k, a);
        } else if (a_vec) {
            widen8(a128[(abase + (m0 + r) * p.lda + k) / 8u], a);
        } else {
            [[unroll]] for (uint j = 0; j < 8u; j++) a[j] = a_at(m0 + r, k + j);
        }
#endif
        [[unroll]] for (uint j = 0; j < 8u; j++) acc[r] = fma(a[j], b[j], acc[r]);
    }
}

// The rows' sums through the epilogue into C; row m0's as C holds it.
float store_rows(float acc[ROWS], uint m0, uint n) {
    const uint cbase = gl_WorkGroupID.z * p.M * p.N;
    float stored = 0.0;
    [[unroll]] for (uint r = 0; r < ROWS; r++) {
        if (m0 + r >= p.M) break;
        const uint ci = cbase + (m0 + r) * p.N + n;
        const float v = epilogue(acc[r], ci, n);
        store_c(ci, v);
        if (r == 0u) stored = as_c(v);
    }
    return stored;
}

// B as N x K: one step's words of column n's row (at word row8) into bw.
void load_step(uint row8, uint w, uint lane) {
    [[unroll]] for (uint u = 0; u < UNROLL; u++) bw[u] = b128[row8 + w + u * SUBGROUP + lane];
}

// B as N x K: column n, the subgroup's lanes along K; its row m0 as C holds it (lane 0).
float column_of_b(uint m0, uint n) {
    const uint lane = gl_SubgroupInvocationID;
    const uint row = bbase + n * p.ldb;
    float acc[ROWS];
    [[unroll]] for (uint r = 0; r < ROWS; r++) acc[r] = 0.0;
    uint k = 0;
    if ((p.flags & FLAG_B_VEC) != 0u) {
        // Whole 8-element words: UNROLL per lane per step, then one per lane.
        const uint words = p.K / 8u, step = SUBGROUP * UNROLL;
        uint w = 0;
        for (; w + step <= words; w += step) {
            if (!ahead) load_step(row / 8u, w, lane);
            ahead = false;
            [[unroll]] for (uint u = 0; u < UNROLL; u++) {
                float b[8];
                widen8(bw[u], b);
                fma8(acc, m0, (w + u * SUBGROUP + lane) * 8u, b);
            }
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
    return lane == 0u ? store_rows(acc, m0, n) : 0.0;
}

// B as N x K: a subgroup per column. With the LayerNorm head the workgroups step over
// the columns by the grid's width, the first column's first step loading while the
// workgroup normalizes A (plan_steps.c and hl_product_ln_head: one row, B in whole words, K a multiple of 8).
void rows_of_b(uint m0) {
    uint n = gl_WorkGroupID.x * NSG + gl_SubgroupID;
#ifdef LN_HEAD
    ahead = n < p.N && SUBGROUP * UNROLL <= p.K / 8u;
    if (ahead) load_step((bbase + n * p.ldb) / 8u, 0u, gl_SubgroupInvocationID);
    ln_head();
    for (; n < p.N; n += gl_NumWorkGroups.x * NSG) column_of_b(m0, n);
#else
    if (n < p.N) column_of_b(m0, n);  // a whole subgroup: no barrier below
#endif
}

// B as K x N: a lane per column, the subgroups taking every NSG-th k.
void cols_of_b(uint m0) {
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

#ifdef PERSIST
#include "../persist/persist_runtime.glsl"
#else
void main() {
    abase = gl_WorkGroupID.z * p.sa;
    bbase = gl_WorkGroupID.z * p.sb;
    const uint m0 = gl_WorkGroupID.y * ROWS;
    if (TRANS_B)
        rows_of_b(m0);
    else
        cols_of_b(m0);
}
#endif
