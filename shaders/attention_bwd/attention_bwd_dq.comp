#version 460
// attention_bwd_dq.comp — flash-attention backward, the first of two kernels
// (FlashAttention-2's recomputation, split so that no kernel needs atomics):
// for a block of query rows, delta = rowsum(dO * O) (written for the second
// kernel) and dQ = scale * dS K, where P = exp(scale * Q K^T - lse) is recomputed
// from the forward's log-sum-exp, dP = dO V^T and dS = P * (dP - delta).
//
// Layout and masking as attention_coop.comp: workgroup (x, y) owns query rows
// [x*BR, x*BR + BR) of head y; each subgroup keeps its rows' Q and dO fragments
// and the dQ accumulators in registers; the K and V tiles stream through shared
// memory BC keys at a time, prefetched one tile ahead. Per tile a subgroup
// computes S on the tensor cores into its fp32 scratch, reads P from it (rows
// over lanes), computes dP into the same scratch, writes dS in the input type
// and multiplies dS K into dQ. The causal mask is top-left (key j seen by query
// i when j <= i); key tails are zero-filled and masked, query tails computed and
// not stored.
//
// FOLD=1 (the default; attention_bwd_common.glsl): each row's lse and delta ride
// in S's and dP's products (A fragments built once), P stays in registers, dS is
// stored 16-bit for dQ's product, and only tiles holding a masked element (the
// causal diagonal, the key tail) zero it in the scratch.
// P_IN_REGISTERS (a build of its own, FOLD=1 and TN == TK, for devices with NV
// cooperative matrix 2's conversions; csrc/core/kernels/attention_bwd.c picks it for a variant
// with a dQ key tile of its own, `dq`): dS becomes an A operand of dS K in registers
// instead of going through the 16-bit scratch (no store, no sync), masked elements are
// zeroed in P on the fragments (each element's row and column from an ids tile, as the
// forward's), and the scratch keeps only the fold's pieces and the tail's store tile
// (COMPACT_SCRATCH), so wider key tiles fit: at d=128 64 keys (model: 1x32x4096x128 the
// kernel alone 1.221 against 1.348 ms with 32 keys through the scratch).
#ifdef P_IN_REGISTERS
#extension GL_NV_cooperative_matrix2 : require
#define COMPACT_SCRATCH
#endif
#include "spec_attention_bwd_dq.glsl"
#define OWN_ROWS p.sq
#include "attention_bwd_common.glsl"
#define SHARED_DECLARED (16u * uint(sm.length()))
#include "../common/shared_check.glsl"   // dQ is NaN where the C side's count is short
#include "../attention/attention_ids.glsl"

layout(set = 0, binding = BINDING_DELTA) writeonly buffer Delta { float delta[]; };
layout(set = 0, binding = BINDING_DQ) writeonly buffer DQ128 { uvec4 dq128[]; };

void fetch(uint kb, uint vb, uint pv, uint j0) {
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0; i < PER_T; i++) {
        uint idx = tid + i * THREADS;
        uint r = idx / DV, c = idx % DV;
        bool ok = idx < TILE_VECS && j0 + r < p.skv;
        uint e = (j0 + r) * pv + c;
        reg0[i] = ok ? k128[kb + e] : uvec4(0);
        reg1[i] = ok ? v128[vb + e] : uvec4(0);
    }
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const uint bh = gl_WorkGroupID.y;
    // Causal: the longest rows first (as the forward).
    const uint qblk = CAUSAL != 0 ? gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x : gl_WorkGroupID.x;
    const uint q0 = qblk * BR;
    const uint r0 = q0 + sg * RQ;
    // the head's rows (attention_layout.glsl), in 16-byte vectors; dQ lies where Q does
    const uint qpv = pitch_elem(QKV_RS) / 8u, opv = pitch_elem(O_RS) / 8u;
    const uint qbase = head_elem(bh, p.sq, QKV_RS, p.q_off) / 8u, obase = head_elem(bh, p.sq, O_RS, 0u) / 8u;
    const uint kbase = head_elem(bh, p.skv, QKV_RS, p.k_off) / 8u;
    const uint vbase = head_elem(bh, p.skv, QKV_RS, p.v_off) / 8u;
    const uint SUB = REGION0 + sg * SUB_VECS;
    const uint DS_OFF = SUB + RQ * SROW;
    const uint K_OFF = T0_OFF, V_OFF = T1_OFF;
    const uint part = lane % LPR;

#ifdef P_IN_REGISTERS
    // the ids tile (attention_ids.glsl; ordered before the loop's reads by the staging's barriers)
    for (uint idx = tid; idx < IDS_VECS; idx += THREADS)
        sm[IDS_OFF + idx] = IDS_VEC(idx);
#endif
    coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> qf[WQ][D / TK], dof[WQ][D / TK];
    STAGE_OWNED(q128, qf, qbase, qpv, q0)
    STAGE_OWNED(do128, dof, obase, opv, q0)

    // delta and the log-sum-exp (log2 units) of this lane's rows; rows past the end
    // take 0 (finite: their P and dS stay finite and are never stored).
    float lse2[PASSES], dlt[PASSES];
    [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
        const uint grow = r0 + ps * RPP + lane / LPR;
        float acc = 0.0;
        if (grow < p.sq)
            for (uint vi = part; vi < DV; vi += LPR) acc += dot8(o128[obase + grow * opv + vi], do128[obase + grow * opv + vi]);
        [[unroll]] for (uint off = 1; off < LPR; off *= 2) acc += subgroupShuffleXor(acc, off);
        dlt[ps] = acc;
        lse2[ps] = grow < p.sq ? lse[bh * p.sq + grow] * LOG2E : 0.0;
        if (part == 0 && grow < p.sq) delta[bh * p.sq + grow] = acc;
    }

    // FOLD=1: this subgroup's rows' -lse/scale and -delta as A fragments (their
    // pieces in each row's first columns), against a constant B fragment.
    coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> lsef[WQ], dltf[WQ];
    const coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> ones =
        coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>(IN_T(FOLD_ONE));
    if (FOLD != 0) {
        if (part == 0)
            [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
                const uint r = ps * RPP + lane / LPR;
                put_pieces(SUB + r * FOLD_VECS, -lse2[ps] / p.scale_log2);
                put_pieces(SUB + (RQ + r) * FOLD_VECS, -dlt[ps]);
            }
        sub_sync();
        [[unroll]] for (uint w = 0; w < WQ; w++) {
            coopMatLoad(lsef[w], sm, SUB + w * TM * FOLD_VECS, FOLD_VECS, gl_CooperativeMatrixLayoutRowMajor);
            coopMatLoad(dltf[w], sm, SUB + (RQ + w * TM) * FOLD_VECS, FOLD_VECS, gl_CooperativeMatrixLayoutRowMajor);
        }
    }

    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> dq[WQ][D / TN];
    [[unroll]] for (uint w = 0; w < WQ; w++)
        [[unroll]] for (uint j = 0; j < D / TN; j++)
            dq[w][j] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);

    const uint kv_end = CAUSAL != 0 ? min(p.skv, q0 + BR) : p.skv;
    const uint ntiles = (kv_end + BC - 1) / BC;
    fetch(kbase, vbase, qpv, 0);
    for (uint t = 0; t < ntiles; t++) {
        const uint j0 = t * BC;
        barrier();                                 // staging / previous tile consumed
        put();
        barrier();
        if (t + 1 < ntiles) fetch(kbase, vbase, qpv, j0 + BC);
        // Every key of the tile masked for this subgroup's rows: skip the work, not
        // the barriers (as the forward).
        const bool live = CAUSAL == 0 || j0 <= r0 + RQ - 1;

        if (FOLD != 0) {
            // As the dK/dV kernel: the same syncs in every subgroup.
#ifdef P_IN_REGISTERS
            coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> dsa[WQ][BC / TN];
#endif
            const bool wg_masked = j0 + BC > p.skv || (CAUSAL != 0 && j0 + BC - 1 > q0);
#ifdef P_IN_REGISTERS
            // One TN-key slab at a time: P's and dP's products side by side, P masked on its
            // fragments (the ids tile: row * TN + column; key tails too: their K rows are zero,
            // but P there is exp(-lse), inf for a row whose scores all lie far below zero),
            // dS = P dP' converted to A operands. Only the slab's two accumulators and
            // the tile's dS fragments are live (P of every slab first, as the scratch path
            // does, spilled: 255 registers and 3x the time on the H100).
            if (live) {
                const bool masked = j0 + BC > p.skv || (CAUSAL != 0 && j0 + BC - 1 > r0);
                [[unroll]] for (uint n = 0; n < BC / TN; n++) {
                    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> pr[WQ], s[WQ];
                    [[unroll]] for (uint w = 0; w < WQ; w++) {
                        pr[w] = coopMatMulAdd(lsef[w], ones,
                                              coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0));
                        s[w] = coopMatMulAdd(dltf[w], ones,
                                             coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0));
                    }
                    [[unroll]] for (uint kk = 0; kk < D / TK; kk++) {
                        coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> kf, vf;
                        coopMatLoad(kf, sm, K_OFF + n * TN * DROW + kk * (TK / 8), DROW,
                                    gl_CooperativeMatrixLayoutColumnMajor);
                        coopMatLoad(vf, sm, V_OFF + n * TN * DROW + kk * (TK / 8), DROW,
                                    gl_CooperativeMatrixLayoutColumnMajor);
                        [[unroll]] for (uint w = 0; w < WQ; w++) {
                            pr[w] = coopMatMulAdd(qf[w][kk], kf, pr[w]);
                            s[w] = coopMatMulAdd(dof[w][kk], vf, s[w]);
                        }
                    }
                    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> id;
                    if (masked) coopMatLoad(id, sm, IDS_OFF, TN / 4, gl_CooperativeMatrixLayoutRowMajor);
                    [[unroll]] for (uint w = 0; w < WQ; w++) {
                        [[unroll]] for (int i = 0; i < pr[w].length(); i++) pr[w][i] = exp2(pr[w][i] * p.scale_log2);
                        if (masked) MASK_BY_IDS(pr[w], id, r0 + w * TM, j0 + n * TN, 0.0)
                        coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> r = pr[w] * s[w];
                        ROUND_FRAG_BF16(r);
                        dsa[w][n] = coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>(r);
                    }
                }
            }
#else
            if (live) {
                // P = exp2(scale_log2 (Q K^T - lse/scale)) in registers
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> pr[WQ][BC / TN];
                [[unroll]] for (uint n = 0; n < BC / TN; n++) {
                    [[unroll]] for (uint w = 0; w < WQ; w++)
                        pr[w][n] = coopMatMulAdd(lsef[w], ones,
                                                 coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0));
                    [[unroll]] for (uint kk = 0; kk < D / TK; kk++) {
                        coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> kf;
                        coopMatLoad(kf, sm, K_OFF + n * TN * DROW + kk * (TK / 8), DROW,
                                    gl_CooperativeMatrixLayoutColumnMajor);
                        [[unroll]] for (uint w = 0; w < WQ; w++) pr[w][n] = coopMatMulAdd(qf[w][kk], kf, pr[w][n]);
                    }
                    [[unroll]] for (uint w = 0; w < WQ; w++)
                        for (int i = 0; i < pr[w][n].length(); i++) pr[w][n][i] = exp2(pr[w][n][i] * p.scale_log2);
                }
                // dS = P (dO V^T - delta), stored 16-bit
                [[unroll]] for (uint n = 0; n < BC / TN; n++) {
                    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
                    [[unroll]] for (uint w = 0; w < WQ; w++)
                        s[w] = coopMatMulAdd(dltf[w], ones,
                                             coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0));
                    [[unroll]] for (uint kk = 0; kk < D / TK; kk++) {
                        coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> vf;
                        coopMatLoad(vf, sm, V_OFF + n * TN * DROW + kk * (TK / 8), DROW,
                                    gl_CooperativeMatrixLayoutColumnMajor);
                        [[unroll]] for (uint w = 0; w < WQ; w++) s[w] = coopMatMulAdd(dof[w][kk], vf, s[w]);
                    }
                    [[unroll]] for (uint w = 0; w < WQ; w++) {
                        coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> r = pr[w][n] * s[w];
                        ROUND_FRAG_BF16(r);
                        coopMatStore(coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(r), sm,
                                     DS_OFF + w * TM * PROW + n * (TN / 8), PROW, gl_CooperativeMatrixLayoutRowMajor);
                    }
                }
            }
#endif
#ifndef P_IN_REGISTERS
            sub_sync();
            if (wg_masked) {
                if (live && (j0 + BC > p.skv || (CAUSAL != 0 && j0 + BC - 1 > r0)))
                    ZERO_MASKED16(DS_OFF, j0 + col >= p.skv || (CAUSAL != 0 && j0 + col > r0 + r));
                sub_sync();
            }
#endif
            if (live) {
                // dQ += dS K
                [[unroll]] for (uint kk = 0; kk < BC / TK; kk++) {
                    coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> dsf[WQ];
                    [[unroll]] for (uint w = 0; w < WQ; w++)
#ifdef P_IN_REGISTERS
                        dsf[w] = dsa[w][kk];
#else
                        coopMatLoad(dsf[w], sm, DS_OFF + w * TM * PROW + kk * (TK / 8), PROW,
                                    gl_CooperativeMatrixLayoutRowMajor);
#endif
                    [[unroll]] for (uint j = 0; j < D / TN; j++) {
                        coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> kf;
                        coopMatLoad(kf, sm, K_OFF + kk * TK * DROW + j * (TN / 8), DROW,
                                    gl_CooperativeMatrixLayoutRowMajor);
                        [[unroll]] for (uint w = 0; w < WQ; w++) dq[w][j] = coopMatMulAdd(dsf[w], kf, dq[w][j]);
                    }
                }
            }
            continue;
        }

        // S = Q K^T into the fp32 scratch.
        if (live) [[unroll]] for (uint n = 0; n < BC / TN; n++) {
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
            [[unroll]] for (uint w = 0; w < WQ; w++)
                s[w] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
            [[unroll]] for (uint kk = 0; kk < D / TK; kk++) {
                coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> kf;
                coopMatLoad(kf, sm, K_OFF + n * TN * DROW + kk * (TK / 8), DROW,
                            gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint w = 0; w < WQ; w++) s[w] = coopMatMulAdd(qf[w][kk], kf, s[w]);
            }
            [[unroll]] for (uint w = 0; w < WQ; w++)
                coopMatStore(s[w], sm, SUB + w * TM * SROW + n * (TN / 4), SROW,
                             gl_CooperativeMatrixLayoutRowMajor);
        }
        sub_sync();

        // P, row by row (masked keys 0).
        float pv[PASSES][CPL];
        if (live) [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
            const uint r = ps * RPP + lane / LPR, grow = r0 + r;
            [[unroll]] for (uint c = 0; c < CPL; c++) {
                const uint col = part * CPL + c, gcol = j0 + col;
                const bool masked = gcol >= p.skv || (CAUSAL != 0 && gcol > grow);
                const float e = exp2(f_at(SUB, r, col) * p.scale_log2 - lse2[ps]);
                pv[ps][c] = masked ? 0.0 : e;
            }
        }
        sub_sync();                                // every S read before dP overwrites it

        // dP = dO V^T into the same scratch.
        if (live) [[unroll]] for (uint n = 0; n < BC / TN; n++) {
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
            [[unroll]] for (uint w = 0; w < WQ; w++)
                s[w] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
            [[unroll]] for (uint kk = 0; kk < D / TK; kk++) {
                coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> vf;
                coopMatLoad(vf, sm, V_OFF + n * TN * DROW + kk * (TK / 8), DROW,
                            gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint w = 0; w < WQ; w++) s[w] = coopMatMulAdd(dof[w][kk], vf, s[w]);
            }
            [[unroll]] for (uint w = 0; w < WQ; w++)
                coopMatStore(s[w], sm, SUB + w * TM * SROW + n * (TN / 4), SROW,
                             gl_CooperativeMatrixLayoutRowMajor);
        }
        sub_sync();

        // dS = P (dP - delta), in the input type.
        if (live) [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
            const uint r = ps * RPP + lane / LPR;
            float ds[CPL];
            [[unroll]] for (uint c = 0; c < CPL; c++) ds[c] = pv[ps][c] * (f_at(SUB, r, part * CPL + c) - dlt[ps]);
            PUT_ROW16(DS_OFF, r, part, ds)
        }
        sub_sync();

        if (!live) continue;
        // dQ += dS K
        [[unroll]] for (uint kk = 0; kk < BC / TK; kk++) {
            coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> dsf[WQ];
            [[unroll]] for (uint w = 0; w < WQ; w++)
                coopMatLoad(dsf[w], sm, DS_OFF + w * TM * PROW + kk * (TK / 8), PROW,
                            gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0; j < D / TN; j++) {
                coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> kf;
                coopMatLoad(kf, sm, K_OFF + kk * TK * DROW + j * (TN / 8), DROW,
                            gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint w = 0; w < WQ; w++) dq[w][j] = coopMatMulAdd(dsf[w], kf, dq[w][j]);
            }
        }
    }

    sub_sync();
    STORE_OWNED(dq128, dq, qbase, qpv, q0, UNLESS_MISCOUNTED(p.scale))
}
