#version 460
// matmul_coop.comp — C = A*B on KHR cooperative matrices (tensor cores).
//
// A workgroup owns a BM x BN block of C; it has WM x WN subgroups, each owning
// SG_M x SG_N accumulator tiles of TM x TN. K advances BK at a time through
// shared memory (STAGES=2: the next block's global loads are issued before the
// current one is multiplied, so they overlap). DIRECT=true loads fragments
// straight from global memory in workgroups whose block is interior and aligned.
// Tails: loads past M, N, K are zero-filled; edge tiles of C are staged through
// shared memory and written element by element with bounds checks.
// Build-time defines: ACC_F16 (fp16 accumulators), OUT_F16 (fp16 output).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#include "matmul_common.glsl"

#ifdef ACC_F16
#define ACC_T float16_t
#else
#define ACC_T float
#endif

layout(constant_id = 0) const uint TM = 16;
layout(constant_id = 1) const uint TN = 16;
layout(constant_id = 2) const uint TK = 16;
layout(constant_id = 3) const uint WM = 2;
layout(constant_id = 4) const uint WN = 2;
layout(constant_id = 5) const uint SG_M = 2;
layout(constant_id = 6) const uint SG_N = 2;
layout(constant_id = 7) const uint BK = 32;
layout(constant_id = 8) const uint SUBGROUP = 32;
layout(constant_id = 9) const uint STAGES = 2;
layout(constant_id = 10) const bool DIRECT = false;
layout(local_size_x_id = 11) in;   // = WM * WN * SUBGROUP

const uint THREADS = WM * WN * SUBGROUP;
const uint BM = WM * SG_M * TM;
const uint BN = WN * SG_N * TN;
// Shared tiles hold 16-byte vectors; rows are padded by one vector against bank conflicts.
const uint A_ROW = BK / 8 + 1;          // vectors per A row in shared memory
const uint B_ROW = BN / 8 + 1;
const uint A_VECS = BM * BK / 8;        // vectors per A block
const uint B_VECS = BK * BN / 8;
const uint A_PER_T = (A_VECS + THREADS - 1) / THREADS;
const uint B_PER_T = (B_VECS + THREADS - 1) / THREADS;

shared uvec4 As[BM * A_ROW];
shared uvec4 Bs[BK * B_ROW];
shared OUT_T scratch[WM * WN * TM * TN];

// 8 halfs starting at element e of A (row gr, column gk), zero past the edges.
uvec4 load_a(uint gr, uint gk) {
    if (gr >= p.M || gk >= p.K) return uvec4(0);
    uint e = gr * p.K + gk;
    if ((p.flags & FLAG_A_VEC) != 0u) return a128[e / 8u];
    uint w[8];
    [[unroll]] for (uint i = 0; i < 8u; i++) w[i] = gk + i < p.K ? uint(a16[e + i]) : 0u;
    return uvec4(w[0] | (w[1] << 16), w[2] | (w[3] << 16), w[4] | (w[5] << 16), w[6] | (w[7] << 16));
}

uvec4 load_b(uint gk, uint gc) {
    if (gk >= p.K || gc >= p.N) return uvec4(0);
    uint e = gk * p.N + gc;
    if ((p.flags & FLAG_B_VEC) != 0u) return b128[e / 8u];
    uint w[8];
    [[unroll]] for (uint i = 0; i < 8u; i++) w[i] = gc + i < p.N ? uint(b16[e + i]) : 0u;
    return uvec4(w[0] | (w[1] << 16), w[2] | (w[3] << 16), w[4] | (w[5] << 16), w[6] | (w[7] << 16));
}

coopmat<ACC_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc[SG_M * SG_N];
uvec4 ra[A_PER_T];
uvec4 rb[B_PER_T];

void fetch(uint m0, uint n0, uint k0, uint tid) {
    [[unroll]] for (uint r = 0; r < A_PER_T; r++) {
        uint i = tid + r * THREADS;
        ra[r] = i < A_VECS ? load_a(m0 + i / (BK / 8), k0 + (i % (BK / 8)) * 8) : uvec4(0);
    }
    [[unroll]] for (uint r = 0; r < B_PER_T; r++) {
        uint i = tid + r * THREADS;
        rb[r] = i < B_VECS ? load_b(k0 + i / (BN / 8), n0 + (i % (BN / 8)) * 8) : uvec4(0);
    }
}

void commit(uint tid) {
    [[unroll]] for (uint r = 0; r < A_PER_T; r++) {
        uint i = tid + r * THREADS;
        if (i < A_VECS) As[(i / (BK / 8)) * A_ROW + i % (BK / 8)] = ra[r];
    }
    [[unroll]] for (uint r = 0; r < B_PER_T; r++) {
        uint i = tid + r * THREADS;
        if (i < B_VECS) Bs[(i / (BN / 8)) * B_ROW + i % (BN / 8)] = rb[r];
    }
}

void multiply_shared(uint wm, uint wn) {
    [[unroll]] for (uint kk = 0; kk < BK; kk += TK) {
        coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> fa[SG_M];
        coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> fb[SG_N];
        [[unroll]] for (uint i = 0; i < SG_M; i++)
            coopMatLoad(fa[i], As, ((wm * SG_M + i) * TM) * A_ROW + kk / 8, A_ROW,
                        gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint j = 0; j < SG_N; j++)
            coopMatLoad(fb[j], Bs, kk * B_ROW + ((wn * SG_N + j) * TN) / 8, B_ROW,
                        gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint i = 0; i < SG_M; i++)
            [[unroll]] for (uint j = 0; j < SG_N; j++)
                acc[i * SG_N + j] = coopMatMulAdd(fa[i], fb[j], acc[i * SG_N + j]);
    }
}

void multiply_direct(uint row0, uint col0, uint k0) {
    [[unroll]] for (uint kk = 0; kk < BK; kk += TK) {
        coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> fa[SG_M];
        coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> fb[SG_N];
        [[unroll]] for (uint i = 0; i < SG_M; i++)
            coopMatLoad(fa[i], a128, ((row0 + i * TM) * p.K + k0 + kk) / 8, p.K / 8,
                        gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint j = 0; j < SG_N; j++)
            coopMatLoad(fb[j], b128, ((k0 + kk) * p.N + col0 + j * TN) / 8, p.N / 8,
                        gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint i = 0; i < SG_M; i++)
            [[unroll]] for (uint j = 0; j < SG_N; j++)
                acc[i * SG_N + j] = coopMatMulAdd(fa[i], fb[j], acc[i * SG_N + j]);
    }
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID;
    const uint lane = gl_SubgroupInvocationID;
    const uint wm = sg / WN, wn = sg % WN;
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    const uint row0 = m0 + wm * SG_M * TM, col0 = n0 + wn * SG_N * TN;

    [[unroll]] for (uint i = 0; i < SG_M * SG_N; i++)
        acc[i] = coopmat<ACC_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);

    // Uniform per workgroup: interior, aligned blocks may skip shared memory.
    const bool direct = DIRECT && (p.flags & (FLAG_A_VEC | FLAG_B_VEC)) == (FLAG_A_VEC | FLAG_B_VEC) &&
                        m0 + BM <= p.M && n0 + BN <= p.N && p.K % BK == 0u;
    if (direct) {
        for (uint k0 = 0; k0 < p.K; k0 += BK) multiply_direct(row0, col0, k0);
    } else if (STAGES >= 2u) {
        fetch(m0, n0, 0u, tid);
        for (uint k0 = 0; k0 < p.K; k0 += BK) {
            commit(tid);
            barrier();
            if (k0 + BK < p.K) fetch(m0, n0, k0 + BK, tid);   // in flight during the MMAs
            multiply_shared(wm, wn);
            barrier();
        }
    } else {
        for (uint k0 = 0; k0 < p.K; k0 += BK) {
            fetch(m0, n0, k0, tid);
            commit(tid);
            barrier();
            multiply_shared(wm, wn);
            barrier();
        }
    }

    // Interior, aligned blocks store tiles straight to C. Edge blocks stage each
    // tile through shared memory and write it element by element with bounds
    // checks; the choice and the barriers are uniform across the workgroup.
    const bool block_whole = (p.flags & FLAG_C_DIRECT) != 0u && m0 + BM <= p.M && n0 + BN <= p.N;
    const uint sbase = sg * TM * TN;
    [[unroll]] for (uint i = 0; i < SG_M; i++) {
        [[unroll]] for (uint j = 0; j < SG_N; j++) {
            const uint gr = row0 + i * TM, gc = col0 + j * TN;
            coopmat<OUT_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> out_tile =
                coopmat<OUT_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(acc[i * SG_N + j]);
            if (block_whole) {
                coopMatStore(out_tile, c, gr * p.N + gc, p.N, gl_CooperativeMatrixLayoutRowMajor);
            } else {
                coopMatStore(out_tile, scratch, sbase, TN, gl_CooperativeMatrixLayoutRowMajor);
                barrier();
                [[unroll]] for (uint t = 0; t < (TM * TN + SUBGROUP - 1) / SUBGROUP; t++) {
                    uint e = lane + t * SUBGROUP;
                    uint r = gr + e / TN, q = gc + e % TN;
                    if (e < TM * TN && r < p.M && q < p.N) c[r * p.N + q] = scratch[sbase + e];
                }
                barrier();
            }
        }
    }
}
