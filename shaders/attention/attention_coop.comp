#version 460
// attention_coop.comp — flash-attention forward, O = softmax(scale * Q K^T) V,
// on KHR cooperative matrices: fp16 (or bfloat16) in and out, fp32 scores, fp32 running
// max/sum and an fp32 output accumulator.
//
// Q, K, V and O are packed (B*H, S, D) row-major. Workgroup (x, y) owns query
// rows [x*BR, x*BR + BR) of head y; each of its NSG subgroups owns WQ tiles of
// TM rows and keeps their Q fragments and O accumulators in registers for the
// whole pass. Keys advance BC at a time: the workgroup stages the K and V tile
// in shared memory (rows padded by one 16-byte vector against bank conflicts)
// from registers loaded one tile ahead (the matmul kernel's register prefetch).
// Per tile a subgroup computes its scores S = Q K^T on the tensor cores and
// stores them to its own shared scratch; its invocations run the online
// softmax over whole rows there (KHR leaves the accumulator's element layout
// to the driver, so rows are only addressable through memory), write P in fp16 (bf16)
// and each row's rescale factor as a TM x TN tile; then O = O * rescale + P V,
// the rescale applied as a component-wise product of two accumulators, and
// skipped for a tile where no row's running max moved by more than 2^8. The
// causal mask is top-left aligned (torch's is_causal): key tiles past the
// workgroup's last row are never loaded, and a subgroup skips tiles past its
// own rows. Key tails are zero-filled and masked; query tails are computed and
// not stored. LSE: each row's log-sum-exp of the scaled scores (natural log, fp32,
// (B*H, S_q)) is written too, what the backward recomputes P from.
//
// FOLD=1 (the default; HELIOS_DISABLE_ATTENTION_FOLD=1 turns it off): each row's running
// max rides in the score product, and a tile without masked elements whose scores stay
// within RESCALE_SLACK of it takes P element-wise on the fragments; the other tiles run
// the row-wise softmax through the scratch (attention_softmax_tiles.glsl says how).
//
// ROWS=1 (where csrc/core/kernels/layout.c finds the accumulator's layout fit for it): the
// softmax stays in registers, each lane holding its rows' running max and part sums
// (attention_softmax_rows.glsl says how).
//
// P_IN_REGISTERS (a build of its own, for devices with NV cooperative matrix 2's
// conversions; csrc/core/kernels/attention.c picks it with ROWS=1 and TN == TK): the rows path
// hands P to P V as A operands converted from its accumulators in registers, where
// otherwise P goes through the subgroup's shared scratch (a store, a subgroup sync and a
// load per tile). The conversion is exact: P is already rounded to the input type.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
// IN_BF16: Q, K, V, P and O in bfloat16 (bf16 x bf16 -> fp32 fragments); the
// scores, softmax and the O accumulator stay fp32.
#ifdef IN_BF16
#extension GL_EXT_bfloat16 : require
#define IN_T bfloat16_t
#else
#define IN_T float16_t
#endif
#include "../common/bf16.glsl"

#ifdef P_IN_REGISTERS
#extension GL_NV_cooperative_matrix2 : require
#endif

// TM, TN, TK (coop shape), D (head dimension: a multiple of TK, TN and 8), BC (keys
// per tile), NSG (subgroups per workgroup), WQ (row tiles per subgroup), SUBGROUP,
// CAUSAL and the workgroup size (NSG * SUBGROUP): shaders/families.py.
#include "spec_attention_coop.glsl"
const float RESCALE_SLACK = 8.0;                  // see the softmax below

#include "push_attention.glsl"  // the push words (shaders/layouts.py)
#include "attention_layout.glsl"

layout(set = 0, binding = BINDING_Q) readonly buffer Q128 { uvec4 q128[]; };
layout(set = 0, binding = BINDING_K) readonly buffer K128 { uvec4 k128[]; };
layout(set = 0, binding = BINDING_O) writeonly buffer O128 { uvec4 o128[]; };
layout(set = 0, binding = BINDING_V) readonly buffer V128 { uvec4 v128[]; };
layout(set = 0, binding = BINDING_LSE) writeonly buffer Lse { float lse[]; };

const uint THREADS = NSG * SUBGROUP;
const uint RQ = WQ * TM;                       // query rows per subgroup
const uint BR = NSG * RQ;                      // query rows per workgroup
const uint DV = D / 8;                         // 16-byte vectors per row of Q/K/V/O
const uint DROW = DV + 1;                      // padded pitch (vectors) in shared memory
// One shared array, regions in 16-byte vectors: the K and V tiles (Q staging
// uses them before the loop), then per subgroup a scratch that holds S
// (fp32) and, once every row is read, P (fp16), the rescale tile (fp32) and
// (FOLD=1) the rows' max pieces; or P straight from the fast path.
const uint REGION0 = 2 * BC * DROW;
const uint QCH = 2 * BC;                       // Q rows staged per round (multiple of TM)
const uint SROW = BC / 4 + 1;                  // S pitch (vectors of 4 floats)
const uint PROW = BC / 8 + 1;                  // P pitch (vectors of 8 halfs)
const uint AROW = TN / 4;                      // rescale tile pitch
const uint S_VECS = RQ * SROW;
// FOLD=1: the rows' max pieces after the rescale tile (one fragment row of TK
// elements each: attention_fold.glsl's FOLD_VECS).
const uint PIECE_VECS = FOLD != 0 ? RQ * (TK / 8) : 0;
const uint PA_VECS = RQ * PROW + RQ * AROW + PIECE_VECS;
// ROWS=1 with P_IN_REGISTERS keeps neither S nor P in the scratch: it holds only the tail
// rows' O tile (at SUB, TM x TN 16-bit) and the ids tile after it (TM x TN fp32), so
// larger key tiles fit beside the K/V tiles (csrc/core/kernels/attention.c counts the same).
#ifdef P_IN_REGISTERS
const uint COMPACT_VECS = TM * (TN / 8) + TM * (TN / 4);
const uint SUB_VECS = ROWS != 0 ? COMPACT_VECS : (S_VECS > PA_VECS ? S_VECS : PA_VECS);
const uint IDS_AT = ROWS != 0 ? TM * (TN / 8) : RQ * PROW;   // the ids tile (ROWS=1), from SUB
#else
const uint SUB_VECS = S_VECS > PA_VECS ? S_VECS : PA_VECS;
const uint IDS_AT = RQ * PROW;
#endif
const uint K_OFF = 0, V_OFF = BC * DROW;
shared uvec4 sm[REGION0 + NSG * SUB_VECS];
#define SHARED_DECLARED (16u * uint(sm.length()))
#include "../common/shared_check.glsl"   // O is NaN where the C side's count is short
#include "attention_fold.glsl"
#include "attention_ids.glsl"

// The softmax's view of a subgroup's rows: LPR invocations share a row, each
// with CPL consecutive columns; PASSES rounds cover RQ rows.
const uint LPR = SUBGROUP >= RQ ? SUBGROUP / RQ : 1;
const uint CPL = BC / LPR;
const uint RPP = SUBGROUP / LPR;               // rows per pass
const uint PASSES = RQ / RPP;

// Prefetch registers: the next tile's K and V vectors.
const uint TILE_VECS = BC * DV;
const uint PER_T = (TILE_VECS + THREADS - 1) / THREADS;
uvec4 kreg[PER_T], vreg[PER_T];

// The next K/V tile: rows j0.. of the head's K (at kb) and V (at vb), pv vectors apart.
void fetch(uint kb, uint vb, uint pv, uint j0) {
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0; i < PER_T; i++) {
        uint idx = tid + i * THREADS;
        uint r = idx / DV, c = idx % DV;
        bool ok = idx < TILE_VECS && j0 + r < p.skv;
        uint e = (j0 + r) * pv + c;
        kreg[i] = ok ? k128[kb + e] : uvec4(0);
        vreg[i] = ok ? v128[vb + e] : uvec4(0);
    }
}

void put() {
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0; i < PER_T; i++) {
        uint idx = tid + i * THREADS;
        if (idx < TILE_VECS) {
            uint r = idx / DV, c = idx % DV;
            sm[K_OFF + r * DROW + c] = kreg[i];
            sm[V_OFF + r * DROW + c] = vreg[i];
        }
    }
}

#include "../common/subgroup_sync.glsl"

// Two probabilities packed as P's element type (round to nearest even).
uint pack_p(float a, float b) {
#ifdef IN_BF16
    return pack_bf16x2_finite(a, b);
#else
    return packHalf2x16(vec2(a, b));
#endif
}

// ROWS=1: where a lane's accumulator elements lie (csrc/core/kernels/layout.c probes it per device
// and shape): element i of a TM x TN fragment is in the lane's row slot
// (i >> ROWS_SHIFT) & (ROWS_SLOTS - 1), and the lanes lane ^ m (m within ROWS_LANES) hold
// the same rows in the same slots. H100: two rows a lane (16x16: elements 0-3 and 4-7),
// four lanes a row; lavapipe (8x8): lane l holds column l, element i row i.
uint rr_slot(uint i) { return (i >> ROWS_SHIFT) & (ROWS_SLOTS - 1u); }
float s_at(uint base, uint r, uint c) { return uintBitsToFloat(sm[base + r * SROW + c / 4][c % 4]); }

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const uint bh = gl_WorkGroupID.y;
    // Causal: the longest rows (most key tiles) first, so the short ones fill the
    // last wave instead of the long ones running alone at the end.
    const uint qblk = CAUSAL != 0 ? gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x : gl_WorkGroupID.x;
    const uint q0 = qblk * BR;
    const uint r0 = q0 + sg * RQ;                  // this subgroup's first row
    // the head's rows (attention_layout.glsl), in 16-byte vectors
    const uint qpv = pitch_elem(QKV_RS) / 8u, opv = pitch_elem(O_RS) / 8u;
    const uint qbase = head_elem(bh, p.sq, QKV_RS, p.q_off) / 8u, obase = head_elem(bh, p.sq, O_RS, 0u) / 8u;
    const uint kbase = head_elem(bh, p.skv, QKV_RS, p.k_off) / 8u;
    const uint vbase = head_elem(bh, p.skv, QKV_RS, p.v_off) / 8u;
    const uint SUB = REGION0 + sg * SUB_VECS;
    const uint P_OFF = SUB, A_OFF = SUB + IDS_AT, PIECE_OFF = A_OFF + RQ * AROW;

    // Q: staged through the K/V region QCH rows at a time (zero rows past the
    // end), each subgroup taking its fragments from the round holding its rows.
    coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> qf[WQ][D / TK];
    // ROWS=1: the ids tile in the subgroup's rescale region (unused then): loaded as an
    // accumulator, element i of a lane holds its row * TN + column (read where rows and
    // columns matter: masked tiles and the epilogue; the barriers below order it)
    if (ROWS != 0)
        for (uint idx = lane; idx < TM * TN / 4; idx += SUBGROUP)
            sm[A_OFF + idx] = IDS_VEC(idx);
    for (uint c0 = 0; c0 < BR; c0 += QCH) {
        barrier();
        for (uint idx = tid; idx < QCH * DV; idx += THREADS) {
            uint r = idx / DV, c = idx % DV, gr = q0 + c0 + r;
            sm[r * DROW + c] = c0 + r < BR && gr < p.sq ? q128[qbase + gr * qpv + c] : uvec4(0);
        }
        barrier();
        [[unroll]] for (uint w = 0; w < WQ; w++) {
            const uint row = sg * RQ + w * TM;
            if (row >= c0 && row < c0 + QCH)
                [[unroll]] for (uint kk = 0; kk < D / TK; kk++)
                    coopMatLoad(qf[w][kk], sm, (row - c0) * DROW + kk * (TK / 8), DROW,
                                gl_CooperativeMatrixLayoutRowMajor);
        }
    }

    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> o[WQ][D / TN];
    [[unroll]] for (uint w = 0; w < WQ; w++)
        [[unroll]] for (uint j = 0; j < D / TN; j++)
            o[w][j] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
    float m_run[PASSES], l_run[PASSES];
    // FOLD=1: the max each row's pieces in mf hold (0 before the row has one), and
    // whether that is every row's running max (the fast path's condition).
    float m_fold[PASSES];
    bool exact = false;
    [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
        m_run[ps] = -1.0 / 0.0;
        l_run[ps] = 0.0;
        m_fold[ps] = 0.0;
    }
    coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> mf[WQ];
    [[unroll]] for (uint w = 0; w < WQ; w++) mf[w] = coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>(0.0);
    const coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> fold_one =
        coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>(IN_T(FOLD_ONE));
    // FOLD=1: the row sums of P as stored (times FOLD_ONE, in every column), taken by the
    // tensor cores beside P V (P times fold_one) and rescaled with O: no lane sums a row.
    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> lsum[WQ];
    [[unroll]] for (uint w = 0; w < WQ; w++)
        lsum[w] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);

    // ROWS=1: per row tile w and row slot r (index w * ROWS_SLOTS + r): the row's running max (-inf until
    // it has one) and this lane's part of its sum; alpha_rr: a slow tile's rescale
    float m_rr[WQ * ROWS_SLOTS], l_rr[WQ * ROWS_SLOTS], alpha_rr[WQ * ROWS_SLOTS];
    [[unroll]] for (uint k = 0; k < WQ * ROWS_SLOTS; k++) {
        m_rr[k] = -1.0 / 0.0;
        l_rr[k] = 0.0;
    }
    bool rr_have = false;                          // every row of this lane has a max
    const uint kv_end = CAUSAL != 0 ? min(p.skv, q0 + BR) : p.skv;
    const uint ntiles = (kv_end + BC - 1) / BC;
    const uint part = lane % LPR;
    fetch(kbase, vbase, qpv, 0);
    for (uint t = 0; t < ntiles; t++) {
        const uint j0 = t * BC;
        barrier();                                 // Q fragments / previous tile consumed
        put();
        barrier();
        if (t + 1 < ntiles) fetch(kbase, vbase, qpv, j0 + BC);
        // Every key of the tile masked for this subgroup's rows: skip its work,
        // not its barriers (lavapipe mis-runs subgroup barriers that only some
        // subgroups of a workgroup reach).
        const bool live = CAUSAL == 0 || j0 <= r0 + RQ - 1;

// S (minus the folded max, FOLD=1) of TN-column slab n for every row tile, into s.
#define SCORES(s, n)                                                                       \
    [[unroll]] for (uint w = 0; w < WQ; w++) {                                             \
        s[w] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);     \
        if (FOLD != 0) s[w] = coopMatMulAdd(mf[w], fold_one, s[w]);                        \
    }                                                                                      \
    [[unroll]] for (uint kk = 0; kk < D / TK; kk++) {                                      \
        coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> kf;                         \
        coopMatLoad(kf, sm, K_OFF + (n) * TN * DROW + kk * (TK / 8), DROW,                 \
                    gl_CooperativeMatrixLayoutColumnMajor);                                \
        [[unroll]] for (uint w = 0; w < WQ; w++) s[w] = coopMatMulAdd(qf[w][kk], kf, s[w]); \
    }

        bool any_rescale = false;                  // the rescale tile holds this tile's factors
#ifdef P_IN_REGISTERS
        coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> su[BC / TN][WQ];
#endif
        if (ROWS != 0) {                           // O is rescaled element by element here
#include "attention_softmax_rows.glsl"
        } else {
#include "attention_softmax_tiles.glsl"
        }
        if (!live) continue;
        // O = O * rescale + P V
        if (any_rescale) [[unroll]] for (uint w = 0; w < WQ; w++) {
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> am;
            coopMatLoad(am, sm, A_OFF + w * TM * AROW, AROW, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0; j < D / TN; j++) o[w][j] = o[w][j] * am;
            if (FOLD != 0) {
                lsum[w] = lsum[w] * am;
                coopMatLoad(mf[w], sm, PIECE_OFF + w * TM * FOLD_VECS, FOLD_VECS, gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        [[unroll]] for (uint kk = 0; kk < BC / TK; kk++) {
            coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> pf[WQ];
            [[unroll]] for (uint w = 0; w < WQ; w++) {
#ifdef P_IN_REGISTERS
                if (ROWS != 0) pf[w] = coopmat<IN_T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>(su[kk][w]);   // TN == TK
                else
#endif
                coopMatLoad(pf[w], sm, P_OFF + w * TM * PROW + kk * (TK / 8), PROW,
                            gl_CooperativeMatrixLayoutRowMajor);
                if (FOLD != 0) lsum[w] = coopMatMulAdd(pf[w], fold_one, lsum[w]);
            }
            [[unroll]] for (uint j = 0; j < D / TN; j++) {
                coopmat<IN_T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> vf;
                coopMatLoad(vf, sm, V_OFF + kk * TK * DROW + j * (TN / 8), DROW,
                            gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint w = 0; w < WQ; w++) o[w][j] = coopMatMulAdd(pf[w], vf, o[w][j]);
            }
        }
    }

    // O / l, then fp16 (bf16) out: straight to memory where the workgroup's rows all
    // exist, through the scratch (rows past the end dropped) where they do not.
    // FOLD=1: each row's l read from lsum's first column (through the rescale tile).
    // ROWS=1: each row's l from its lanes' parts, O scaled element by element.
    if (ROWS != 0) {
        coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> id;
        coopMatLoad(id, sm, A_OFF, TN / 4, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint w = 0; w < WQ; w++) {
            float inv[ROWS_SLOTS];
            [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++) {
                const uint k = w * ROWS_SLOTS + r;
                float l = l_rr[k];
                [[unroll]] for (uint off = 1; off <= ROWS_LANES; off <<= 1)
                    if ((ROWS_LANES & off) != 0u) l += subgroupShuffleXor(l, off);
                inv[r] = UNLESS_MISCOUNTED(l > 0.0 ? 1.0 / l : 0.0);
                const uint row = r0 + w * TM + uint(id[r << ROWS_SHIFT]) / TN;   // slot r's row
                if (LSE != 0 && (lane & ROWS_LANES) == 0u && row < p.sq)
                    lse[bh * p.sq + row] = l > 0.0 ? (m_rr[k] + log2(l)) * 0.6931471805599453 : 1.0 / 0.0;
            }
            [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++)
                [[unroll]] for (uint j = 0; j < D / TN; j++)
                    [[unroll]] for (int i = 0; i < o[w][j].length(); i++)
                        if (rr_slot(uint(i)) == r) o[w][j][i] *= inv[r];
        }
    } else {
    sub_sync();
    if (FOLD != 0) [[unroll]] for (uint w = 0; w < WQ; w++)
        coopMatStore(lsum[w], sm, A_OFF + w * TM * AROW, AROW, gl_CooperativeMatrixLayoutRowMajor);
    sub_sync();
    if (FOLD != 0) [[unroll]] for (uint ps = 0; ps < PASSES; ps++)
        l_run[ps] = uintBitsToFloat(sm[A_OFF + (ps * RPP + lane / LPR) * AROW].x) / FOLD_ONE;
    sub_sync();
    [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
        const uint r = ps * RPP + lane / LPR;
        float inv = UNLESS_MISCOUNTED(l_run[ps] > 0.0 ? 1.0 / l_run[ps] : 0.0);
        for (uint vi = part; vi < AROW; vi += LPR) sm[A_OFF + r * AROW + vi] = floatBitsToUint(vec4(inv));
        // m_run and l_run are in log2 units of the scaled scores; a row that saw no
        // key stores +inf (every P of it recomputes to 0).
        if (LSE != 0 && part == 0 && r0 + r < p.sq)
            lse[bh * p.sq + r0 + r] = l_run[ps] > 0.0 ? (m_run[ps] + log2(l_run[ps])) * 0.6931471805599453 : 1.0 / 0.0;
    }
    }
    sub_sync();
    [[unroll]] for (uint w = 0; w < WQ; w++) {
        coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> am;
        if (ROWS == 0) coopMatLoad(am, sm, A_OFF + w * TM * AROW, AROW, gl_CooperativeMatrixLayoutRowMajor);
        const uint row0 = r0 + w * TM;
        [[unroll]] for (uint j = 0; j < D / TN; j++) {
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> of = o[w][j];
            if (ROWS == 0) of = of * am;
            ROUND_FRAG_BF16(of);
            coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> oh =
                coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(of);
            if (q0 + BR <= p.sq) {   // workgroup-uniform: lavapipe mis-runs subgroup barriers that
                                     // only some subgroups of a workgroup reach
                coopMatStore(oh, o128, obase + row0 * opv + j * (TN / 8), opv, gl_CooperativeMatrixLayoutRowMajor);
            } else {
                coopMatStore(oh, sm, SUB, TN / 8, gl_CooperativeMatrixLayoutRowMajor);
                sub_sync();
                for (uint i = lane; i < TM * (TN / 8); i += SUBGROUP) {
                    uint r = i / (TN / 8), c = i % (TN / 8);
                    if (row0 + r < p.sq) o128[obase + (row0 + r) * opv + j * (TN / 8) + c] = sm[SUB + i];
                }
                sub_sync();
            }
        }
    }
}
