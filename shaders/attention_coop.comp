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
// FOLD=1 (the default; HELIOS_DISABLE_ATTENTION_FOLD=1 turns it off): each row's
// running max rides in the score product (attention_fold.glsl: an A fragment per
// row tile, rebuilt when a max moves), so a tile's P = exp2(scale_log2 * S') is
// element-wise on the accumulators and stored 16-bit straight away; no fp32 scores
// go through the scratch and no lane reads them by row. That fast path is taken
// by a subgroup for a tile without masked elements once every row has a max, and
// kept when no element of the tile exceeds its row's max by more than
// RESCALE_SLACK (the same bound the lazy rescale keeps); otherwise (the first tile,
// the causal diagonal, the key tail, a max that moved) the tile runs the row-wise
// softmax through the scratch as before. Either way the row sums are taken by the
// tensor cores beside the P V product (P, as stored in 16 bits, times a constant
// fragment), kept in an accumulator rescaled with O.
//
// ROWS=1 (where csrc/core/layout.c finds the accumulator's layout fit for it: the
// default at d <= 64 and causal at any d; HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS=1
// turns it off): the softmax stays in registers. Each lane keeps, per row slot of its
// elements (rr_slot), the row's running max and its part of the row's sum; a tile's
// scores are scaled and their row's max subtracted on the fragments; if every row has
// a max and no element passes it by more than RESCALE_SLACK (one vote), P = exp2 of
// them as they are; otherwise the rows' maxima are taken by each lane and joined by
// shuffles over ROWS_LANES, rows that moved are bumped and O rescaled element by
// element. P is stored 16-bit for P V as above; no fp32 scores go through memory and
// no lane reads a row. Masked tiles and the epilogue read each element's row and
// column from an ids tile (row * TN + column, loaded as an accumulator).
//
// P_IN_REGISTERS (a build of its own, for devices with NV cooperative matrix 2's
// conversions; csrc/core/attention.c picks it with ROWS=1 and TN == TK): the rows path
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
#include "bf16.glsl"

#ifdef P_IN_REGISTERS
#extension GL_NV_cooperative_matrix2 : require
#endif

// TM, TN, TK (coop shape), D (head dimension: a multiple of TK, TN and 8), BC (keys
// per tile), NSG (subgroups per workgroup), WQ (row tiles per subgroup), SUBGROUP,
// CAUSAL and the workgroup size (NSG * SUBGROUP): shaders/families.py.
#include "spec_attention_coop.glsl"
const float RESCALE_SLACK = 8.0;                  // see the softmax below

layout(push_constant) uniform Push {
    uint heads;        // B * H
    uint sq, skv;      // query and key rows per head
    float scale_log2;  // scale * log2(e): scores go through exp2
    uint nh;                       // heads per batch element (rows layouts)
    uint q_off, k_off, v_off;      // where Q, K, V (dQ, dK, dV) start in their rows
} p;
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
// larger key tiles fit beside the K/V tiles (csrc/core/attention.c counts the same).
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
#include "shared_check.glsl"   // O is NaN where the C side's count is short
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

#include "subgroup_sync.glsl"

// Two probabilities packed as P's element type (round to nearest even).
uint pack_p(float a, float b) {
#ifdef IN_BF16
    return pack_bf16x2_finite(a, b);
#else
    return packHalf2x16(vec2(a, b));
#endif
}

// ROWS=1: where a lane's accumulator elements lie (csrc/core/layout.c probes it per device
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
          if (live) {
            const bool masked_rr = j0 + BC > p.skv || (CAUSAL != 0 && j0 + BC - 1 > r0);
            // x = scale_log2 * S minus the row's running max (0 before it has one), masked
#ifndef P_IN_REGISTERS
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> su[BC / TN][WQ];
#endif
            // the lane's largest x, in four independent chains (a single chain of max over a
            // tile's 16-32 elements is what the vote below waits for)
            float tops[4] = float[4](-1.0 / 0.0, -1.0 / 0.0, -1.0 / 0.0, -1.0 / 0.0);
            [[unroll]] for (uint n = 0; n < BC / TN; n++) {
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
                SCORES(s, n)
                [[unroll]] for (uint w = 0; w < WQ; w++) {
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++) {
                        const float m = m_rr[w * ROWS_SLOTS + r], u = isinf(m) ? 0.0 : m;
                        [[unroll]] for (int i = 0; i < s[w].length(); i++)
                            if (rr_slot(uint(i)) == r) s[w][i] = s[w][i] * p.scale_log2 - u;
                    }
                    if (masked_rr) {   // the ids tile: each element's row * TN + column
                        coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> id;
                        coopMatLoad(id, sm, A_OFF, TN / 4, gl_CooperativeMatrixLayoutRowMajor);
                        MASK_BY_IDS(s[w], id, r0 + w * TM, j0 + n * TN, -1.0 / 0.0)
                    }
                    [[unroll]] for (int i = 0; i < s[w].length(); i++) tops[i & 3] = max(tops[i & 3], s[w][i]);
                    su[n][w] = s[w];
                }
            }
            // Every row has a max and no element passes it by more than the slack: P as it
            // is (the common case: no row maximum taken, no shuffle). Otherwise the rows'
            // maxima through ROWS_LANES's shuffles and the lazy rescale, as the row-wise path's.
            const float top = max(max(tops[0], tops[1]), max(tops[2], tops[3]));
            if (!subgroupAll(rr_have && top <= RESCALE_SLACK)) {
                bool moved = false;
                [[unroll]] for (uint w = 0; w < WQ; w++) {
                    float mx[ROWS_SLOTS];
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++) mx[r] = -1.0 / 0.0;
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++)
                        [[unroll]] for (uint n = 0; n < BC / TN; n++)
                            [[unroll]] for (int i = 0; i < su[n][w].length(); i++)
                                if (rr_slot(uint(i)) == r) mx[r] = max(mx[r], su[n][w][i]);
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++) {
                        [[unroll]] for (uint off = 1; off <= ROWS_LANES; off <<= 1)
                            if ((ROWS_LANES & off) != 0u) mx[r] = max(mx[r], subgroupShuffleXor(mx[r], off));
                        // relative to the old offset; a row without a max takes its first one
                        const uint k = w * ROWS_SLOTS + r;
                        const bool none = isinf(m_rr[k]);
                        const bool bump = none ? !isinf(mx[r]) : mx[r] > RESCALE_SLACK;
                        const float delta = bump ? mx[r] : 0.0;
                        m_rr[k] = bump ? (none ? mx[r] : m_rr[k] + mx[r]) : m_rr[k];
                        // A row's first max rescales nothing (its sum and O are still 0):
                        // exp2(-max) overflows to inf below a max of -128, and inf * 0 is NaN.
                        alpha_rr[k] = none ? 0.0 : exp2(-delta);
                        l_rr[k] *= alpha_rr[k];
                        moved = moved || bump;
                        mx[r] = delta;
                    }
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++)
                        [[unroll]] for (uint n = 0; n < BC / TN; n++)
                            [[unroll]] for (int i = 0; i < su[n][w].length(); i++)
                                if (rr_slot(uint(i)) == r) su[n][w][i] -= mx[r];
                }
                rr_have = true;
                [[unroll]] for (uint k = 0; k < WQ * ROWS_SLOTS; k++) rr_have = rr_have && !isinf(m_rr[k]);
                if (subgroupAny(moved)) [[unroll]] for (uint w = 0; w < WQ; w++)
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++)
                        [[unroll]] for (uint j = 0; j < D / TN; j++)
                            [[unroll]] for (int i = 0; i < o[w][j].length(); i++)
                                if (rr_slot(uint(i)) == r) o[w][j][i] *= alpha_rr[w * ROWS_SLOTS + r];
            }
            [[unroll]] for (uint n = 0; n < BC / TN; n++)
                [[unroll]] for (uint w = 0; w < WQ; w++) {
                    [[unroll]] for (int i = 0; i < su[n][w].length(); i++) {
                        float e = exp2(su[n][w][i]);
#ifdef IN_BF16
                        e = uintBitsToFloat((floatBitsToUint(e) + 0x8000u) & 0xFFFF0000u);
#endif
                        su[n][w][i] = e;
                    }
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++)
                        [[unroll]] for (int i = 0; i < su[n][w].length(); i++)
                            if (rr_slot(uint(i)) == r) l_rr[w * ROWS_SLOTS + r] += su[n][w][i];
#ifndef P_IN_REGISTERS
                    coopMatStore(coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(su[n][w]), sm,
                                 P_OFF + w * TM * PROW + n * (TN / 8), PROW, gl_CooperativeMatrixLayoutRowMajor);
#endif
                }
          }
#ifndef P_IN_REGISTERS
          sub_sync();                              // P stored before the subgroup loads it
#endif
        } else {
        // FOLD=1, the fast path: P = exp2(scale_log2 * (S - max)) on the fragments,
        // stored 16-bit; kept if no element exceeds 2^RESCALE_SLACK (uniform per
        // subgroup, as is every condition here: the syncs below are taken by all).
        const bool masked_here = j0 + BC > p.skv || (CAUSAL != 0 && j0 + BC - 1 > r0);
        const bool try_fast = FOLD != 0 && live && !masked_here && subgroupAll(exact);
        float top = -1.0 / 0.0;
        if (try_fast)
        [[unroll]] for (uint n = 0; n < BC / TN; n++) {
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
            SCORES(s, n)
            [[unroll]] for (uint w = 0; w < WQ; w++) {
                for (int i = 0; i < s[w].length(); i++) {
                    const float x = s[w][i] * p.scale_log2;
                    top = max(top, x);
#ifdef IN_BF16
                    // to nearest (ties away), as pack_p: the conversion below is then exact
                    s[w][i] = uintBitsToFloat((floatBitsToUint(exp2(x)) + 0x8000u) & 0xFFFF0000u);
#else
                    s[w][i] = exp2(x);
#endif
                }
                coopMatStore(coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(s[w]), sm,
                             P_OFF + w * TM * PROW + n * (TN / 8), PROW, gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        const bool fast = try_fast && subgroupAll(top <= RESCALE_SLACK);
        const bool slow = live && !fast;
        if (FOLD != 0) sub_sync();                 // a failed try's P stores before the scores overwrite them

        // S = Q K^T, one TN-column slab at a time, into the subgroup's scratch.
        if (slow) [[unroll]] for (uint n = 0; n < BC / TN; n++) {
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
            SCORES(s, n)
            [[unroll]] for (uint w = 0; w < WQ; w++)
                coopMatStore(s[w], sm, SUB + w * TM * SROW + n * (TN / 4), SROW,
                             gl_CooperativeMatrixLayoutRowMajor);
        }
        sub_sync();

        // Online softmax over this tile's columns, row by row.
        float pv[PASSES][CPL];
        float alpha[PASSES];
        bool rescale = false;
        if (slow) [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
            const uint r = ps * RPP + lane / LPR;
            const uint grow = r0 + r;
            float mx = -1.0 / 0.0;
            [[unroll]] for (uint c = 0; c < CPL; c++) {
                const uint col = part * CPL + c, gcol = j0 + col;
                float x = s_at(SUB, r, col) * p.scale_log2;
                if (FOLD != 0) x += m_fold[ps];
                bool masked = gcol >= p.skv || (CAUSAL != 0 && gcol > grow);
                x = masked ? -1.0 / 0.0 : x;
                pv[ps][c] = x;
                mx = max(mx, x);
            }
            [[unroll]] for (uint off = 1; off < LPR; off *= 2) mx = max(mx, subgroupShuffleXor(mx, off));
            // Lazy rescaling: the running max moves only when the tile's exceeds it
            // by more than RESCALE_SLACK (log2 units); otherwise p stays below
            // 2^RESCALE_SLACK (exact enough in fp16, P's relative precision is the
            // same at any magnitude) and O needs no rescale for this row.
            const bool bump = mx > m_run[ps] + RESCALE_SLACK;
            const float m_new = bump ? mx : m_run[ps];
            const float m_use = isinf(m_new) ? 0.0 : m_new;   // a row with no key yet
            alpha[ps] = bump ? exp2(m_run[ps] - m_use) : 1.0;
            rescale = rescale || bump;
            float sum = 0.0;
            [[unroll]] for (uint c = 0; c < CPL; c++) {
                pv[ps][c] = exp2(pv[ps][c] - m_use);
                sum += pv[ps][c];
            }
            if (FOLD == 0) {   // FOLD=1: lsum, beside P V
                [[unroll]] for (uint off = 1; off < LPR; off *= 2) sum += subgroupShuffleXor(sum, off);
                l_run[ps] = l_run[ps] * alpha[ps] + sum;
            }
            m_run[ps] = m_new;
        }
        // Whether any row of the subgroup moved its max (uniform: the rescale below
        // is a cooperative operation).
        any_rescale = subgroupAny(rescale);
        sub_sync();                                // every S read before P overwrites it
        if (slow) [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
            const uint r = ps * RPP + lane / LPR;
            [[unroll]] for (uint c8 = 0; c8 < CPL / 8; c8++) {
                uvec4 v;
                [[unroll]] for (uint h = 0; h < 4; h++)
                    v[h] = pack_p(pv[ps][c8 * 8 + 2 * h], pv[ps][c8 * 8 + 2 * h + 1]);
                sm[P_OFF + r * PROW + (part * CPL) / 8 + c8] = v;
            }
            if (any_rescale)
                for (uint vi = part; vi < AROW; vi += LPR) sm[A_OFF + r * AROW + vi] = floatBitsToUint(vec4(alpha[ps]));
            if (FOLD != 0 && any_rescale) {
                // the rows' new max into their pieces (mf reloaded below)
                m_fold[ps] = isinf(m_run[ps]) || isnan(m_run[ps]) ? 0.0 : m_run[ps];
                if (part == 0) put_pieces(PIECE_OFF + r * FOLD_VECS, -m_fold[ps] / p.scale_log2);
            }
        }
        if (FOLD != 0 && any_rescale) {
            exact = true;
            [[unroll]] for (uint ps = 0; ps < PASSES; ps++) exact = exact && m_fold[ps] == m_run[ps];
        }
        sub_sync();

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
