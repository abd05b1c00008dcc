#version 460
// matmul_coop.comp — C = A*B on KHR cooperative matrices (tensor cores).
//
// A workgroup owns a BM x BN block of C; it has WM x WN subgroups, each owning
// SG_M x SG_N accumulator tiles of TM x TN. K advances BK at a time through one
// shared buffer (rows padded by 16 bytes against bank conflicts). STAGES=2 is a
// register prefetch: the next slab's global loads are issued before the current
// slab's MMAs, so they are in flight while the tensor cores work (measured on
// the H100 as the loop shape that wins; two shared buffers with one barrier per
// slab and loader subgroups did not: perf notes at 89c21a3, sessions 3, 10). DIRECT=true loads fragments straight from global memory.
//
// Interior workgroups (block inside C, rows 16-byte aligned, whole K slabs) run
// a loop with no bounds checks; edge workgroups run the same loop with checks
// and zero fill. Both are the same code instantiated with a constant flag.
// RASTER > 1 walks the grid in groups of RASTER block rows so that workgroups
// resident together share A rows and B columns in L2.
// Split-K: workgroup z = batch * splits + s multiplies K range [s*k_chunk,
// (s+1)*k_chunk) and writes an fp32 partial product to the workspace;
// matmul_splitk_reduce.comp sums them and applies the epilogue.
// Layouts (TRANS_A/TRANS_B), batches (grid z, strides sa/sb, 0 = broadcast) and
// the epilogue (EPI/ACT, matmul_common.glsl) change only the loads and the store.
// Build-time defines: ACC_F16 (fp16 accumulators), OUT_F16 (fp16 output), IN_BF16
// (bfloat16 inputs: bf16 x bf16 -> fp32 fragments) with OUT_BF16 (bfloat16 output).
// The slabs hold 16-byte vectors whatever the element type, so only the fragment
// types and the output conversion differ between fp16 and bfloat16.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#ifdef IN_BF16
#extension GL_EXT_bfloat16 : require
#define IN_T bfloat16_t
#else
#define IN_T float16_t
#endif
// TM, TN, TK (coop shape), WM, WN (subgroups), SG_M, SG_N (tiles per subgroup), BK,
// SUBGROUP, STAGES, DIRECT, RASTER and the workgroup size: shaders/families.py.
#include "spec_matmul_coop.glsl"
#include "matmul_common.glsl"
#include "../common/subgroup_sync.glsl"

#ifdef ACC_F16
#define ACC_T float16_t
#else
#define ACC_T float
#endif
// The fragment type of C for the whole-tile store (bfloat16 fragments store into
// the 16-bit words OUT_T declares for C).
#ifdef OUT_BF16
#define COOP_OUT_T bfloat16_t
#else
#define COOP_OUT_T OUT_T
#endif


const uint THREADS = WM * WN * SUBGROUP;
const uint BM = WM * SG_M * TM;
const uint BN = WN * SG_N * TN;
// Shared slabs copy the operand as stored: A is BM x BK (or BK x BM when
// transposed), B is BK x BN (or BN x BK); a transposed slab is read as a
// column-major fragment. Slabs hold 16-byte vectors; rows are padded by one
// vector against bank conflicts.
const uint A_R = TRANS_A ? BK : BM;     // slab rows
const uint A_C = TRANS_A ? BM : BK;     // slab columns (elements)
const uint B_R = TRANS_B ? BN : BK;
const uint B_C = TRANS_B ? BK : BN;
const uint A_VPR = A_C / 8;             // 16-byte vectors per slab row
const uint B_VPR = B_C / 8;
const uint A_ROW = A_VPR + 1;           // padded row pitch in shared memory
const uint B_ROW = B_VPR + 1;
const uint A_VECS = A_R * A_VPR;        // vectors per slab
const uint B_VECS = B_R * B_VPR;
const uint A_PER_T = (A_VECS + THREADS - 1) / THREADS;
const uint B_PER_T = (B_VECS + THREADS - 1) / THREADS;

shared uvec4 As[A_R * A_ROW];
shared uvec4 Bs[B_R * B_ROW];
shared float scratch[WM * WN * TM * TN];
#define SHARED_DECLARED (16u * uint(As.length() + Bs.length()) + 4u * uint(scratch.length()))
#include "../common/shared_check.glsl"   // C is NaN where the C side's count is short
// The staged 16-byte store: every invocation of a subgroup owns 8 elements of a tile.
// (a uint, not a bool: spirv-opt mis-folds && of two specialization-constant bools)
const uint VEC_EPILOGUE = (TM * TN == 8u * SUBGROUP ? 1u : 0u) * (TN % 8u == 0u ? 1u : 0u);
// The staged store a band at a time: once the K loop is over the A slab is free,
// and each subgroup stages a whole band of its tiles (TM rows x SG_N * TN fp32
// columns, rows padded by one vector) there, so one subgroup sync each way serves
// SG_N tiles instead of one. Where the bands do not fit the slab: a tile at a time.
const uint BAND_W = SG_N * TN;                   // a band's columns
const uint BAND_ROW = BAND_W / 4u + 1u;          // its row pitch in 16-byte vectors
const uint BAND_VECS = TM * BAND_ROW;
const uint BAND_STORE = VEC_EPILOGUE * (WM * WN * BAND_VECS <= A_R * A_ROW ? 1u : 0u);

// 8 halfs at row gr, columns gc..gc+7 of the stored operand (row pitch lda/ldb,
// batch base `base`), zero outside rows < rlim, columns < clim (the checked path).
uvec4 load_a_checked(uint base, uint gr, uint gc, uint rlim, uint clim) {
    if (gr >= rlim || gc >= clim) return uvec4(0);
    uint e = base + gr * p.lda + gc;
    if ((p.flags & FLAG_A_VEC) != 0u && gc + 8u <= clim) return a128[e / 8u];
    uint w[8];
    [[unroll]] for (uint i = 0; i < 8u; i++) w[i] = gc + i < clim ? uint(a16[e + i]) : 0u;
    return uvec4(w[0] | (w[1] << 16), w[2] | (w[3] << 16), w[4] | (w[5] << 16), w[6] | (w[7] << 16));
}

uvec4 load_b_checked(uint base, uint gr, uint gc, uint rlim, uint clim) {
    if (gr >= rlim || gc >= clim) return uvec4(0);
    uint e = base + gr * p.ldb + gc;
    if ((p.flags & FLAG_B_VEC) != 0u && gc + 8u <= clim) return b128[e / 8u];
    uint w[8];
    [[unroll]] for (uint i = 0; i < 8u; i++) w[i] = gc + i < clim ? uint(b16[e + i]) : 0u;
    return uvec4(w[0] | (w[1] << 16), w[2] | (w[3] << 16), w[4] | (w[5] << 16), w[6] | (w[7] << 16));
}

#define LOOP_BARRIER() barrier()

coopmat<ACC_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc[SG_M * SG_N];
uvec4 ra[A_PER_T];
uvec4 rb[B_PER_T];

// This workgroup's batch offsets into A and B, in elements. Plain products
// (BATCHED false) compile them to 0, so their loop is the one before batches.
uint abase, bbase;

// Global -> registers for the slab at k0. `checked` is a constant at every call
// site, so each path compiles to its own straight-line code. The unchecked path
// indexes in 16-byte vectors (every term a multiple of 8 elements there).
void fetch(bool checked, uint m0, uint n0, uint k0, uint kend, uint tid) {
    [[unroll]] for (uint r = 0; r < A_PER_T; r++) {
        uint i = tid + r * THREADS;
        uint row = i / A_VPR, col = i % A_VPR;
        uint r0 = TRANS_A ? k0 : m0, c0 = TRANS_A ? m0 : k0;   // the slab's corner as stored
        if (checked)
            ra[r] = i < A_VECS ? load_a_checked(abase, r0 + row, c0 + col * 8u, TRANS_A ? kend : p.M,
                                                TRANS_A ? p.M : kend)
                               : uvec4(0);
        else if (A_VECS % THREADS == 0u || i < A_VECS)
            ra[r] = a128[abase / 8u + (r0 + row) * (p.lda / 8u) + c0 / 8u + col];
    }
    [[unroll]] for (uint r = 0; r < B_PER_T; r++) {
        uint i = tid + r * THREADS;
        uint row = i / B_VPR, col = i % B_VPR;
        uint r0 = TRANS_B ? n0 : k0, c0 = TRANS_B ? k0 : n0;
        if (checked)
            rb[r] = i < B_VECS ? load_b_checked(bbase, r0 + row, c0 + col * 8u, TRANS_B ? p.N : kend,
                                                TRANS_B ? kend : p.N)
                               : uvec4(0);
        else if (B_VECS % THREADS == 0u || i < B_VECS)
            rb[r] = b128[bbase / 8u + (r0 + row) * (p.ldb / 8u) + c0 / 8u + col];
    }
}

// Registers -> the shared slab.
void commit(uint tid) {
    [[unroll]] for (uint r = 0; r < A_PER_T; r++) {
        uint i = tid + r * THREADS;
        if (A_VECS % THREADS == 0u || i < A_VECS) As[(i / A_VPR) * A_ROW + i % A_VPR] = ra[r];
    }
    [[unroll]] for (uint r = 0; r < B_PER_T; r++) {
        uint i = tid + r * THREADS;
        if (B_VECS % THREADS == 0u || i < B_VECS) Bs[(i / B_VPR) * B_ROW + i % B_VPR] = rb[r];
    }
}

void multiply_shared(uint wm, uint wn) {
    [[unroll]] for (uint kk = 0; kk < BK; kk += TK) {
        coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> fa[SG_M];
        coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> fb[SG_N];
        [[unroll]] for (uint i = 0; i < SG_M; i++) {
            if (TRANS_A)
                coopMatLoad(fa[i], As, kk * A_ROW + ((wm * SG_M + i) * TM) / 8, A_ROW,
                            gl_CooperativeMatrixLayoutColumnMajor);
            else
                coopMatLoad(fa[i], As, ((wm * SG_M + i) * TM) * A_ROW + kk / 8, A_ROW,
                            gl_CooperativeMatrixLayoutRowMajor);
        }
        [[unroll]] for (uint j = 0; j < SG_N; j++) {
            if (TRANS_B)
                coopMatLoad(fb[j], Bs, ((wn * SG_N + j) * TN) * B_ROW + kk / 8, B_ROW,
                            gl_CooperativeMatrixLayoutColumnMajor);
            else
                coopMatLoad(fb[j], Bs, kk * B_ROW + ((wn * SG_N + j) * TN) / 8, B_ROW,
                            gl_CooperativeMatrixLayoutRowMajor);
        }
        [[unroll]] for (uint i = 0; i < SG_M; i++)
            [[unroll]] for (uint j = 0; j < SG_N; j++)
                acc[i * SG_N + j] = coopMatMulAdd(fa[i], fb[j], acc[i * SG_N + j]);
    }
}

void multiply_direct(uint row0, uint col0, uint k0) {
    [[unroll]] for (uint kk = 0; kk < BK; kk += TK) {
        coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> fa[SG_M];
        coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> fb[SG_N];
        [[unroll]] for (uint i = 0; i < SG_M; i++) {
            if (TRANS_A)
                coopMatLoad(fa[i], a128, (abase + (k0 + kk) * p.lda + row0 + i * TM) / 8, p.lda / 8,
                            gl_CooperativeMatrixLayoutColumnMajor);
            else
                coopMatLoad(fa[i], a128, (abase + (row0 + i * TM) * p.lda + k0 + kk) / 8, p.lda / 8,
                            gl_CooperativeMatrixLayoutRowMajor);
        }
        [[unroll]] for (uint j = 0; j < SG_N; j++) {
            if (TRANS_B)
                coopMatLoad(fb[j], b128, (bbase + (col0 + j * TN) * p.ldb + k0 + kk) / 8, p.ldb / 8,
                            gl_CooperativeMatrixLayoutColumnMajor);
            else
                coopMatLoad(fb[j], b128, (bbase + (k0 + kk) * p.ldb + col0 + j * TN) / 8, p.ldb / 8,
                            gl_CooperativeMatrixLayoutRowMajor);
        }
        [[unroll]] for (uint i = 0; i < SG_M; i++)
            [[unroll]] for (uint j = 0; j < SG_N; j++)
                acc[i * SG_N + j] = coopMatMulAdd(fa[i], fb[j], acc[i * SG_N + j]);
    }
}

// The K loop over [kbeg, kend) through shared memory.
void main_loop(bool checked, uint m0, uint n0, uint kbeg, uint kend, uint tid, uint wm, uint wn) {
    if (STAGES >= 2u) {
        fetch(checked, m0, n0, kbeg, kend, tid);
        for (uint k0 = kbeg; k0 < kend; k0 += BK) {
            commit(tid);
            LOOP_BARRIER();
            if (k0 + BK < kend) fetch(checked, m0, n0, k0 + BK, kend, tid);   // in flight during the MMAs
            multiply_shared(wm, wn);
            LOOP_BARRIER();
        }
    } else {
        for (uint k0 = kbeg; k0 < kend; k0 += BK) {
            fetch(checked, m0, n0, k0, kend, tid);
            commit(tid);
            barrier();
            multiply_shared(wm, wn);
            barrier();
        }
    }
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID;
    const uint lane = gl_SubgroupInvocationID;
    const uint wm = sg / WN, wn = sg % WN;

    // Block coordinates: rasterized in groups of RASTER block rows.
    const uint gx = gl_NumWorkGroups.x, gy = gl_NumWorkGroups.y;
    uint bx = gl_WorkGroupID.x, by = gl_WorkGroupID.y;
    if (RASTER > 1u) {
        const uint pid = gl_WorkGroupID.y * gx + gl_WorkGroupID.x;
        const uint per_group = RASTER * gx;
        const uint first = (pid / per_group) * RASTER;
        const uint rows = min(gy - first, RASTER);
        const uint local = pid % per_group;
        by = first + local % rows;
        bx = local / rows;
    }
    const uint m0 = by * BM, n0 = bx * BN;
    const uint row0 = m0 + wm * SG_M * TM, col0 = n0 + wn * SG_N * TN;
    // Grid z enumerates batch x split.
    const uint bidx = BATCHED ? gl_WorkGroupID.z / p.splits : 0u;
    const uint zsplit = BATCHED ? gl_WorkGroupID.z % p.splits : gl_WorkGroupID.z;
    abase = BATCHED ? bidx * p.sa : 0u;
    bbase = BATCHED ? bidx * p.sb : 0u;
    const uint kbeg = zsplit * p.k_chunk;
    const uint kend = min(p.K, kbeg + p.k_chunk);

    [[unroll]] for (uint i = 0; i < SG_M * SG_N; i++)
        acc[i] = coopmat<ACC_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);

    // Uniform per workgroup.
    const bool vec = (p.flags & (FLAG_A_VEC | FLAG_B_VEC)) == (FLAG_A_VEC | FLAG_B_VEC);
    const bool block_in = m0 + BM <= p.M && n0 + BN <= p.N;
    const bool interior = vec && block_in && (kend - kbeg) % BK == 0u;
    if (DIRECT && interior) {
        for (uint k0 = kbeg; k0 < kend; k0 += BK) multiply_direct(row0, col0, k0);
    } else if (interior) {
        main_loop(false, m0, n0, kbeg, kend, tid, wm, wn);
    } else {
        main_loop(true, m0, n0, kbeg, kend, tid, wm, wn);
    }

    if (SHARED_OVER != 0u) [[unroll]] for (uint i = 0; i < SG_M * SG_N; i++) acc[i] = acc[i] * ACC_T(MISCOUNT_NAN);
    // Interior, aligned blocks store tiles straight to C (or the workspace).
    // Edge blocks stage each tile through shared memory and write it element by
    // element with bounds checks; the choice and the barriers are uniform.
    const bool split = (p.flags & FLAG_SPLIT) != 0u;
    const uint wbase = gl_WorkGroupID.z * p.M * p.N;   // (batch, split) partial product
    const uint cbase = bidx * p.M * p.N;
    // With an epilogue, every tile goes through the staged per-element store (it
    // needs each element's column and C value); split-K leaves it to the reduction.
    // Measured on the H100 (4096^3, fp16 out, 220e39f): the staged 16-byte store
    // below beat coopMatStore straight to C, so every interior tile takes it
    // where the tile shape allows, epilogue or not; DIRECT_STORE (the variant's
    // store=direct) sends plain products' interior tiles to coopMatStore instead.
    // (uints, not bools: spirv-opt mis-folds && of specialization-constant bools)
    const bool vec_store = VEC_EPILOGUE * max(EPILOGUE ? 1u : 0u, 1u - DIRECT_STORE) == 1u;
    const bool store_whole = block_in && (split ? p.N % 4u == 0u
                                                : !EPILOGUE && !vec_store && (p.flags & FLAG_C_DIRECT) != 0u);
    const uint sbase = sg * TM * TN;
    if (BAND_STORE == 1u && vec_store && block_in && !split && (p.flags & FLAG_C_DIRECT) != 0u) {
        barrier();   // every subgroup is past its last fragment load: the A slab is free
        const uint bbase = sg * BAND_VECS;
        [[unroll]] for (uint i = 0; i < SG_M; i++) {
            [[unroll]] for (uint j = 0; j < SG_N; j++) {
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> part =
                    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(acc[i * SG_N + j]);
                coopMatStore(part, As, bbase + j * (TN / 4u), BAND_ROW, gl_CooperativeMatrixLayoutRowMajor);
            }
            sub_sync();
            [[unroll]] for (uint u = 0; u < TM * BAND_W / (8u * SUBGROUP); u++) {
                const uint e0 = (lane + u * SUBGROUP) * 8u;
                const uint r = e0 / BAND_W, col = e0 % BAND_W;
                const uint q = col0 + col, ci = cbase + (row0 + i * TM + r) * p.N + q;
                const uvec4 lo = As[bbase + r * BAND_ROW + col / 4u], hi = As[bbase + r * BAND_ROW + col / 4u + 1u];
                const vec4 flo = uintBitsToFloat(lo), fhi = uintBitsToFloat(hi);
                store8_c(ci, q, float[8](flo.x, flo.y, flo.z, flo.w, fhi.x, fhi.y, fhi.z, fhi.w));
            }
            sub_sync();   // the next band reuses the staging rows
        }
        return;
    }
    [[unroll]] for (uint i = 0; i < SG_M; i++) {
        [[unroll]] for (uint j = 0; j < SG_N; j++) {
            const uint gr = row0 + i * TM, gc = col0 + j * TN;
            if (store_whole && split) {
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> part =
                    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(acc[i * SG_N + j]);
                coopMatStore(part, ws, wbase + gr * p.N + gc, p.N, gl_CooperativeMatrixLayoutRowMajor);
            } else if (store_whole) {
#ifdef OUT_BF16
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> rounded =
                    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(acc[i * SG_N + j]);
                ROUND_FRAG_BF16(rounded);
                coopmat<COOP_OUT_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> out_tile =
                    coopmat<COOP_OUT_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(rounded);
#else
                coopmat<COOP_OUT_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> out_tile =
                    coopmat<COOP_OUT_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(acc[i * SG_N + j]);
#endif
                coopMatStore(out_tile, c, cbase + gr * p.N + gc, p.N, gl_CooperativeMatrixLayoutRowMajor);
            } else if (vec_store && block_in && !split && (p.flags & FLAG_C_DIRECT) != 0u) {
                // Interior tiles: through this subgroup's own scratch
                // tile, 8 consecutive elements per invocation, one 16-byte store each
                // (two for f32); only the subgroup synchronizes.
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> part =
                    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(acc[i * SG_N + j]);
                coopMatStore(part, scratch, sbase, TN, gl_CooperativeMatrixLayoutRowMajor);
                sub_sync();
                const uint e0 = lane * 8u;
                const uint q = gc + e0 % TN, ci = cbase + (gr + e0 / TN) * p.N + q;
                float v[8];
                [[unroll]] for (uint u = 0; u < 8u; u++) v[u] = scratch[sbase + e0 + u];
                store8_c(ci, q, v);
                sub_sync();   // the next tile reuses the scratch tile
            } else {
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> part =
                    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(acc[i * SG_N + j]);
                coopMatStore(part, scratch, sbase, TN, gl_CooperativeMatrixLayoutRowMajor);
                barrier();
                [[unroll]] for (uint t = 0; t < (TM * TN + SUBGROUP - 1) / SUBGROUP; t++) {
                    uint e = lane + t * SUBGROUP;
                    uint r = gr + e / TN, q = gc + e % TN;
                    if (e < TM * TN && r < p.M && q < p.N) {
                        if (split) ws[wbase + r * p.N + q] = scratch[sbase + e];
                        else store_c(cbase + r * p.N + q, epilogue(scratch[sbase + e], cbase + r * p.N + q, q));
                    }
                }
                barrier();
            }
        }
    }
}
