#version 460
// attention_bwd_dkdv.comp — flash-attention backward, the second kernel: for a
// block of key rows, dV = P^T dO and dK = scale * dS^T Q, with P^T = exp(scale *
// K Q^T - lse) recomputed, dP^T = V dO^T and dS^T = P^T * (dP^T - delta) (delta
// from attention_bwd_dq.comp, which runs first).
//
// Workgroup (x, y) owns key rows [x*BR, x*BR + BR) of head y; each subgroup keeps
// its rows' K and V fragments and the dK and dV accumulators in registers; the Q
// and dO tiles (and their rows' lse and delta) stream through shared memory BC
// queries at a time, prefetched one tile ahead. Everything runs transposed (key
// rows, query columns) so that P^T and dS^T are A operands straight from the
// scratch. Causal (top-left): query tiles wholly before the block's first key are
// never loaded; query tails are masked, key tails computed and not stored.
//
// FOLD=1 (the default; attention_bwd_common.glsl): lse and delta per query column
// ride in S^T's and dP^T's products, P^T and dS^T stay in registers until stored
// 16-bit for dV's and dK's products, and only tiles holding a masked element (the
// causal diagonal, the query tail) zero it in the scratch.
#include "spec_attention_bwd_dkdv.glsl"
#define OWN_ROWS p.skv
#define FOLD_STREAMED
#include "attention_bwd_common.glsl"

layout(set = 0, binding = BINDING_DELTA) readonly buffer Delta { float delta[]; };
layout(set = 0, binding = BINDING_DK) writeonly buffer DK128 { uvec4 dk128[]; };
layout(set = 0, binding = BINDING_DV) writeonly buffer DV128 { uvec4 dv128[]; };

shared float st_lse2[BC], st_dlt[BC];           // the streamed rows' lse (log2 units) and delta
#define SHARED_DECLARED (16u * uint(sm.length()) + 4u * uint(st_lse2.length() + st_dlt.length()))
#include "../common/shared_check.glsl"   // dK and dV are NaN where the C side's count is short
float reg_lse2, reg_dlt;                         // their prefetch (invocations < BC)

// The next Q/dO tile: rows i0.. of the head's Q (at qb, qpv apart) and dO (at ob, opv apart).
void fetch(uint qb, uint qpv, uint ob, uint opv, uint i0) {
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0; i < PER_T; i++) {
        uint idx = tid + i * THREADS;
        uint r = idx / DV, c = idx % DV;
        bool ok = idx < TILE_VECS && i0 + r < p.sq;
        reg0[i] = ok ? q128[qb + (i0 + r) * qpv + c] : uvec4(0);
        reg1[i] = ok ? do128[ob + (i0 + r) * opv + c] : uvec4(0);
    }
    // Rows past the end: lse 0 and delta 0 keep their (masked) values finite.
    const uint srow = gl_WorkGroupID.y * p.sq + i0 + tid;
    const bool ok = tid < BC && i0 + tid < p.sq;
    reg_lse2 = ok ? lse[srow] * LOG2E : 0.0;
    reg_dlt = ok ? delta[srow] : 0.0;
}

#define FRAG_A coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>
#define FRAG_B coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>
#define FRAG_ACC coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>

#ifdef KV_SHARED
// Row tile w's k-step kk of the block's K (which 0) or V (which 1) rows, an A fragment.
FRAG_A kv_frag(uint which, uint w, uint kk) {
    FRAG_A f;
    coopMatLoad(f, sm, KV_OFF + (which * BR + gl_SubgroupID * RQ + w * TM) * DROW + kk * (TK / 8), DROW,
                gl_CooperativeMatrixLayoutRowMajor);
    return f;
}
#endif

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const uint bh = gl_WorkGroupID.y;
    const uint k0 = gl_WorkGroupID.x * BR;          // causal: block 0 has the most queries
    const uint r0 = k0 + sg * RQ;                   // this subgroup's first key row
    // the head's rows (attention_layout.glsl), in 16-byte vectors; dK, dV lie where K, V do
    const uint qpv = pitch_elem(QKV_RS) / 8u, opv = pitch_elem(O_RS) / 8u;
    const uint qbase = head_elem(bh, p.sq, QKV_RS, p.q_off) / 8u, obase = head_elem(bh, p.sq, O_RS, 0u) / 8u;
    const uint kbase = head_elem(bh, p.skv, QKV_RS, p.k_off) / 8u;
    const uint vbase = head_elem(bh, p.skv, QKV_RS, p.v_off) / 8u;
    const uint SUB = REGION0 + sg * SUB_VECS;
    const uint P_OFF = SUB + RQ * SROW;
    const uint Q_OFF = T0_OFF, DO_OFF = T1_OFF;
    const uint part = lane % LPR;

#ifdef KV_SHARED
    for (uint idx = tid; idx < BR * DV; idx += THREADS) {   // ordered by the loop's first barrier
        const uint r = idx / DV, c = idx % DV, gr = k0 + r;
        sm[KV_OFF + r * DROW + c] = gr < p.skv ? k128[kbase + gr * qpv + c] : uvec4(0);
        sm[KV_OFF + (BR + r) * DROW + c] = gr < p.skv ? v128[vbase + gr * qpv + c] : uvec4(0);
    }
#define KF(w, kk) kv_frag(0u, w, kk)
#define VF(w, kk) kv_frag(1u, w, kk)
#else
    coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> kf[WQ][D / TK], vf[WQ][D / TK];
    STAGE_OWNED(k128, kf, kbase, qpv, k0)
    STAGE_OWNED(v128, vf, vbase, qpv, k0)
#define KF(w, kk) kf[w][kk]
#define VF(w, kk) vf[w][kk]
#endif

    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> dk[WQ][D / TN], dv[WQ][D / TN];
    [[unroll]] for (uint w = 0; w < WQ; w++)
        [[unroll]] for (uint j = 0; j < D / TN; j++) {
            dk[w][j] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
            dv[w][j] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
        }

    const uint t_first = CAUSAL != 0 ? k0 / BC : 0;
    const uint ntiles = (p.sq + BC - 1) / BC;
    if (t_first < ntiles) fetch(qbase, qpv, obase, opv, t_first * BC);
    for (uint t = t_first; t < ntiles; t++) {
        const uint i0 = t * BC;
        barrier();                                 // staging / previous tile consumed
        put();
        if (tid < BC) {
            if (FOLD != 0) {
                put_pieces(FOLD_OFF + tid * FOLD_VECS, -reg_lse2 / p.scale_log2);
                put_pieces(FOLD_OFF + (BC + tid) * FOLD_VECS, -reg_dlt);
            } else {
                st_lse2[tid] = reg_lse2;
                st_dlt[tid] = reg_dlt;
            }
        }
        barrier();
        if (t + 1 < ntiles) fetch(qbase, qpv, obase, opv, i0 + BC);
        // Every query of the tile before this subgroup's first key (causal): skip.
        const bool live = CAUSAL == 0 || i0 + BC - 1 >= r0;
        // One query tile, FOLD=1: S'^T = K Q^T - lse/scale and dP'^T = V dO^T - delta on the
        // tensor cores, P^T = exp2(scale_log2 S'^T) and dS^T = P^T dP'^T element-wise in
        // registers, each stored 16-bit (P^T at P_OFF, dS^T at SUB) for dV += P^T dO and
        // dK += dS^T Q. Masked elements are zeroed in the stored tiles.
        if (FOLD != 0) {
            // Every subgroup passes the same syncs (lavapipe pairs a subgroup's
            // barriers with its neighbours'): skipped tiles skip the work, not the
            // syncs, and the zeroing's sync follows the workgroup's condition.
            const FRAG_A ones = FRAG_A(IN_T(FOLD_ONE));
            const bool masked_tile = i0 + BC > p.sq || (CAUSAL != 0 && r0 + RQ - 1 > i0);
            const bool wg_masked = i0 + BC > p.sq || (CAUSAL != 0 && k0 + BR - 1 > i0);
            FRAG_ACC pt[WQ][BC / TN];
            if (live) {
                [[unroll]] for (uint n = 0; n < BC / TN; n++) {
                    [[unroll]] for (uint w = 0; w < WQ; w++) pt[w][n] = FRAG_ACC(0.0);
                    [[unroll]] for (uint kk = 0; kk < D / TK; kk++) {
                        FRAG_B qb;
                        coopMatLoad(qb, sm, Q_OFF + n * TN * DROW + kk * (TK / 8), DROW, gl_CooperativeMatrixLayoutColumnMajor);
                        [[unroll]] for (uint w = 0; w < WQ; w++) pt[w][n] = coopMatMulAdd(KF(w, kk), qb, pt[w][n]);
                    }
                    FRAG_B lb;
                    coopMatLoad(lb, sm, FOLD_OFF + n * TN * FOLD_VECS, FOLD_VECS, gl_CooperativeMatrixLayoutColumnMajor);
                    [[unroll]] for (uint w = 0; w < WQ; w++) {
                        pt[w][n] = coopMatMulAdd(ones, lb, pt[w][n]);
                        for (int i = 0; i < pt[w][n].length(); i++) pt[w][n][i] = exp2(pt[w][n][i] * p.scale_log2);
                        FRAG_ACC r = pt[w][n];
                        ROUND_FRAG_BF16(r);
                        coopMatStore(coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(r), sm,
                                     P_OFF + w * TM * PROW + n * (TN / 8), PROW, gl_CooperativeMatrixLayoutRowMajor);
                    }
                }
            }
            sub_sync();
            if (wg_masked) {
                if (live && masked_tile) ZERO_MASKED16(P_OFF, i0 + col >= p.sq || (CAUSAL != 0 && r0 + r > i0 + col));
                sub_sync();
            }
            if (live) {
                // dV += P^T dO
                [[unroll]] for (uint kk = 0; kk < BC / TK; kk++) {
                    FRAG_A pf[WQ];
                    [[unroll]] for (uint w = 0; w < WQ; w++)
                        coopMatLoad(pf[w], sm, P_OFF + w * TM * PROW + kk * (TK / 8), PROW, gl_CooperativeMatrixLayoutRowMajor);
                    [[unroll]] for (uint j = 0; j < D / TN; j++) {
                        FRAG_B db;
                        coopMatLoad(db, sm, DO_OFF + kk * TK * DROW + j * (TN / 8), DROW, gl_CooperativeMatrixLayoutRowMajor);
                        [[unroll]] for (uint w = 0; w < WQ; w++) dv[w][j] = coopMatMulAdd(pf[w], db, dv[w][j]);
                    }
                }
                // dS^T = P^T (V dO^T - delta), stored 16-bit
                [[unroll]] for (uint n = 0; n < BC / TN; n++) {
                    FRAG_ACC s[WQ];
                    [[unroll]] for (uint w = 0; w < WQ; w++) s[w] = FRAG_ACC(0.0);
                    [[unroll]] for (uint kk = 0; kk < D / TK; kk++) {
                        FRAG_B db;
                        coopMatLoad(db, sm, DO_OFF + n * TN * DROW + kk * (TK / 8), DROW, gl_CooperativeMatrixLayoutColumnMajor);
                        [[unroll]] for (uint w = 0; w < WQ; w++) s[w] = coopMatMulAdd(VF(w, kk), db, s[w]);
                    }
                    FRAG_B lb;
                    coopMatLoad(lb, sm, FOLD_OFF + (BC + n * TN) * FOLD_VECS, FOLD_VECS, gl_CooperativeMatrixLayoutColumnMajor);
                    [[unroll]] for (uint w = 0; w < WQ; w++) {
                        FRAG_ACC r = pt[w][n] * coopMatMulAdd(ones, lb, s[w]);
                        ROUND_FRAG_BF16(r);
                        coopMatStore(coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(r), sm,
                                     SUB + w * TM * PROW + n * (TN / 8), PROW, gl_CooperativeMatrixLayoutRowMajor);
                    }
                }
            }
            sub_sync();
            if (wg_masked) {
                if (live && masked_tile) ZERO_MASKED16(SUB, i0 + col >= p.sq || (CAUSAL != 0 && r0 + r > i0 + col));
                sub_sync();
            }
            if (live) {
                // dK += dS^T Q
                [[unroll]] for (uint kk = 0; kk < BC / TK; kk++) {
                    FRAG_A dsf[WQ];
                    [[unroll]] for (uint w = 0; w < WQ; w++)
                        coopMatLoad(dsf[w], sm, SUB + w * TM * PROW + kk * (TK / 8), PROW, gl_CooperativeMatrixLayoutRowMajor);
                    [[unroll]] for (uint j = 0; j < D / TN; j++) {
                        FRAG_B qb;
                        coopMatLoad(qb, sm, Q_OFF + kk * TK * DROW + j * (TN / 8), DROW, gl_CooperativeMatrixLayoutRowMajor);
                        [[unroll]] for (uint w = 0; w < WQ; w++) dk[w][j] = coopMatMulAdd(dsf[w], qb, dk[w][j]);
                    }
                }
            }
            continue;
        }

        // S^T = K Q^T into the fp32 scratch (key rows, query columns).
        if (live) [[unroll]] for (uint n = 0; n < BC / TN; n++) {
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
            [[unroll]] for (uint w = 0; w < WQ; w++)
                s[w] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
            [[unroll]] for (uint kk = 0; kk < D / TK; kk++) {
                coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> qb;
                coopMatLoad(qb, sm, Q_OFF + n * TN * DROW + kk * (TK / 8), DROW,
                            gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint w = 0; w < WQ; w++) s[w] = coopMatMulAdd(KF(w, kk), qb, s[w]);
            }
            [[unroll]] for (uint w = 0; w < WQ; w++)
                coopMatStore(s[w], sm, SUB + w * TM * SROW + n * (TN / 4), SROW,
                             gl_CooperativeMatrixLayoutRowMajor);
        }
        sub_sync();

        // P^T, row by row (masked queries 0), kept in registers and written in the
        // input type.
        float pv[PASSES][CPL];
        if (live) [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
            const uint r = ps * RPP + lane / LPR, gkey = r0 + r;
            [[unroll]] for (uint c = 0; c < CPL; c++) {
                const uint col = part * CPL + c, gq = i0 + col;
                const bool masked = gq >= p.sq || (CAUSAL != 0 && gkey > gq);
                const float e = exp2(f_at(SUB, r, col) * p.scale_log2 - st_lse2[col]);
                pv[ps][c] = masked ? 0.0 : e;
            }
            PUT_ROW16(P_OFF, r, part, pv[ps])
        }
        sub_sync();                                // S read and P^T written

        if (live) {
            // dV += P^T dO
            [[unroll]] for (uint kk = 0; kk < BC / TK; kk++) {
                coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> pf[WQ];
                [[unroll]] for (uint w = 0; w < WQ; w++)
                    coopMatLoad(pf[w], sm, P_OFF + w * TM * PROW + kk * (TK / 8), PROW,
                                gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint j = 0; j < D / TN; j++) {
                    coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> db;
                    coopMatLoad(db, sm, DO_OFF + kk * TK * DROW + j * (TN / 8), DROW,
                                gl_CooperativeMatrixLayoutRowMajor);
                    [[unroll]] for (uint w = 0; w < WQ; w++) dv[w][j] = coopMatMulAdd(pf[w], db, dv[w][j]);
                }
            }
            // dP^T = V dO^T into the fp32 scratch
            [[unroll]] for (uint n = 0; n < BC / TN; n++) {
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
                [[unroll]] for (uint w = 0; w < WQ; w++)
                    s[w] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
                [[unroll]] for (uint kk = 0; kk < D / TK; kk++) {
                    coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> db;
                    coopMatLoad(db, sm, DO_OFF + n * TN * DROW + kk * (TK / 8), DROW,
                                gl_CooperativeMatrixLayoutColumnMajor);
                    [[unroll]] for (uint w = 0; w < WQ; w++) s[w] = coopMatMulAdd(VF(w, kk), db, s[w]);
                }
                [[unroll]] for (uint w = 0; w < WQ; w++)
                    coopMatStore(s[w], sm, SUB + w * TM * SROW + n * (TN / 4), SROW,
                                 gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        sub_sync();                                // dP^T stored, P^T loads done

        // dS^T = P^T (dP^T - delta) over P^T's tile.
        if (live) [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
            const uint r = ps * RPP + lane / LPR;
            float ds[CPL];
            [[unroll]] for (uint c = 0; c < CPL; c++) {
                const uint col = part * CPL + c;
                ds[c] = pv[ps][c] * (f_at(SUB, r, col) - st_dlt[col]);
            }
            PUT_ROW16(P_OFF, r, part, ds)
        }
        sub_sync();

        if (!live) continue;
        // dK += dS^T Q
        [[unroll]] for (uint kk = 0; kk < BC / TK; kk++) {
            coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> dsf[WQ];
            [[unroll]] for (uint w = 0; w < WQ; w++)
                coopMatLoad(dsf[w], sm, P_OFF + w * TM * PROW + kk * (TK / 8), PROW,
                            gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0; j < D / TN; j++) {
                coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> qb;
                coopMatLoad(qb, sm, Q_OFF + kk * TK * DROW + j * (TN / 8), DROW,
                            gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint w = 0; w < WQ; w++) dk[w][j] = coopMatMulAdd(dsf[w], qb, dk[w][j]);
            }
        }
    }

    sub_sync();
    STORE_OWNED(dk128, dk, kbase, qpv, k0, UNLESS_MISCOUNTED(p.scale))
    STORE_OWNED(dv128, dv, vbase, qpv, k0, UNLESS_MISCOUNTED(1.0))
}
