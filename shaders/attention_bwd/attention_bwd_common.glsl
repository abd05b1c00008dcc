// attention_bwd_common.glsl — what the backward's two coop kernels share: the
// element type, the shared-memory scratch geometry, the row-to-lane mapping of the
// softmax (as attention_coop.comp), tile staging and the 16-byte vector helpers.
// Each kernel defines OWN_ROWS (the buffer length of the rows its workgroup owns:
// p.sq for dQ, p.skv for dK/dV) before including this.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#ifdef IN_BF16
#extension GL_EXT_bfloat16 : require
#define IN_T bfloat16_t
#else
#define IN_T float16_t
#endif
#include "../common/bf16.glsl"

#include "push_attention_bwd.glsl"  // the push words (shaders/layouts.py)
#include "../attention/attention_layout.glsl"

layout(set = 0, binding = BINDING_Q) readonly buffer Q128 { uvec4 q128[]; };
layout(set = 0, binding = BINDING_K) readonly buffer K128 { uvec4 k128[]; };
layout(set = 0, binding = BINDING_V) readonly buffer V128 { uvec4 v128[]; };
layout(set = 0, binding = BINDING_O) readonly buffer O128 { uvec4 o128[]; };
layout(set = 0, binding = BINDING_DO) readonly buffer DO128 { uvec4 do128[]; };
layout(set = 0, binding = BINDING_LSE) readonly buffer Lse { float lse[]; };

const float LOG2E = 1.4426950408889634;
const uint THREADS = NSG * SUBGROUP;
const uint RQ = WQ * TM;                       // owned rows per subgroup
const uint BR = NSG * RQ;                      // owned rows per workgroup
const uint DV = D / 8;                         // 16-byte vectors per row
const uint DROW = DV + 1;                      // padded pitch (vectors) in shared memory
const uint REGION0 = 2 * BC * DROW;            // the two streamed tiles (staging before the loop)
const uint QCH = 2 * BC;                       // owned rows staged per round
const uint SROW = BC / 4 + 1;                  // fp32 scratch pitch (vectors of 4 floats)
const uint PROW = BC / 8 + 1;                  // 16-bit scratch pitch (vectors of 8 elements)
// Per subgroup: an fp32 tile (scores, then dP) and a 16-bit one (P or dS). COMPACT_SCRATCH
// (a kernel that hands P and dS to their products in registers): only what is left, the
// fold's pieces before the loop and the tail rows' store tile.
#ifdef COMPACT_SCRATCH
const uint PIECES_VECS = 2 * RQ * (TK / 8);
const uint SUB_VECS = PIECES_VECS > TM * (TN / 8) ? PIECES_VECS : TM * (TN / 8);
#else
const uint SUB_VECS = RQ * SROW + RQ * PROW;
#endif
const uint T0_OFF = 0, T1_OFF = BC * DROW;     // the streamed tiles
// FOLD=1 in a kernel that streams the statistics' rows (FOLD_STREAMED defined): the
// streamed tile's statistics as B fragments, lse's pieces then delta's (TK elements
// per column).
#ifdef FOLD_STREAMED
const uint FOLD_OFF = REGION0 + NSG * SUB_VECS;
const uint FOLD_TILE_VECS = FOLD != 0 ? 2 * BC * (TK / 8) : 0;
#else
const uint FOLD_TILE_VECS = 0;
#endif
// KV_SHARED (the dK/dV kernel's model): the block's K and V rows in shared memory, read
// as A fragments per product, where otherwise their fragments stay in registers.
#ifdef KV_SHARED
const uint KV_OFF = REGION0 + NSG * SUB_VECS + FOLD_TILE_VECS;
const uint KV_VECS = 2 * BR * DROW;
#else
const uint KV_VECS = 0;
#endif
// COMPACT_SCRATCH: one ids tile per workgroup (TM x TN fp32), whose elements, loaded as an
// accumulator, say where each lane's elements lie (masks on fragments).
const uint IDS_OFF = REGION0 + NSG * SUB_VECS + FOLD_TILE_VECS + KV_VECS;
#ifdef COMPACT_SCRATCH
const uint IDS_VECS = TM * (TN / 4);
#else
const uint IDS_VECS = 0;
#endif
shared uvec4 sm[REGION0 + NSG * SUB_VECS + FOLD_TILE_VECS + KV_VECS + IDS_VECS];

// The softmax's view of a subgroup's rows: LPR invocations share a row, each with
// CPL consecutive columns; PASSES rounds cover RQ rows.
const uint LPR = SUBGROUP >= RQ ? SUBGROUP / RQ : 1;
const uint CPL = BC / LPR;
const uint RPP = SUBGROUP / LPR;
const uint PASSES = RQ / RPP;

// Prefetch registers: the next streamed tile pair.
const uint TILE_VECS = BC * DV;
const uint PER_T = (TILE_VECS + THREADS - 1) / THREADS;
uvec4 reg0[PER_T], reg1[PER_T];

void put() {
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0; i < PER_T; i++) {
        uint idx = tid + i * THREADS;
        if (idx < TILE_VECS) {
            uint r = idx / DV, c = idx % DV;
            sm[T0_OFF + r * DROW + c] = reg0[i];
            sm[T1_OFF + r * DROW + c] = reg1[i];
        }
    }
}

#include "../common/subgroup_sync.glsl"

// The dot product of two 16-byte vectors of 8 elements, in fp32.
float dot8(uvec4 a, uvec4 b) {
    float s = 0.0;
    [[unroll]] for (uint h = 0; h < 4; h++) s += dot(unpack_in2(a[h]), unpack_in2(b[h]));
    return s;
}

float f_at(uint base, uint r, uint c) { return uintBitsToFloat(sm[base + r * SROW + c / 4][c % 4]); }

// FOLD=1: lse and delta ride in S's and dP's products (attention_fold.glsl), so
// P = exp2(scale_log2 * S') and dS = P * dP' are element-wise on fragments: neither
// scores nor dP go through the scratch as fp32 and no lane reads them back by row;
// only P and dS are stored (16-bit) to feed the next products, and tiles holding
// masked elements zero them there.
#include "../attention/attention_fold.glsl"

// Zeroes the elements of this subgroup's 16-bit tile at base (RQ rows, BC columns,
// PROW apart) for which MASKED (an expression of r and col) holds.
#define ZERO_MASKED16(base, MASKED)                                                        \
    for (uint i_ = lane; i_ < RQ * (BC / 8); i_ += SUBGROUP) {                            \
        const uint r = i_ / (BC / 8), at_ = (base) + r * PROW + i_ % (BC / 8);             \
        uvec4 w4 = sm[at_];                                                                \
        [[unroll]] for (uint h = 0; h < 8; h++) {                                          \
            const uint col = (i_ % (BC / 8)) * 8 + h;                                      \
            if (MASKED) w4[h / 2] &= (h % 2 == 0) ? 0xFFFF0000u : 0x0000FFFFu;             \
        }                                                                                  \
        sm[at_] = w4;                                                                      \
    }

// Writes 16-bit values of this lane's CPL columns of row r (v[c] for c < CPL) to the
// 16-bit tile at base.
#define PUT_ROW16(base, r, part, vals)                                                     \
    [[unroll]] for (uint c8 = 0; c8 < CPL / 8; c8++) {                                    \
        uvec4 w4;                                                                          \
        [[unroll]] for (uint h = 0; h < 4; h++)                                            \
            w4[h] = pack_in2(vals[c8 * 8 + 2 * h], vals[c8 * 8 + 2 * h + 1]);               \
        sm[(base) + (r) * PROW + ((part) * CPL) / 8 + c8] = w4;                           \
    }

// Loads the A fragments of this subgroup's owned rows of BUF (rows base_row + ...,
// the head's row 0 at hb and rows pv apart, in vectors) through the staging region,
// QCH rows per round; rows past OWN_ROWS are zero.
#define STAGE_OWNED(BUF, FRAG, hb, pv, base_row)                                           \
    for (uint c0 = 0; c0 < BR; c0 += QCH) {                                               \
        barrier();                                                                         \
        for (uint idx = tid; idx < QCH * DV; idx += THREADS) {                            \
            uint r = idx / DV, c = idx % DV, gr = (base_row) + c0 + r;                     \
            sm[r * DROW + c] = c0 + r < BR && gr < OWN_ROWS ? BUF[(hb) + gr * (pv) + c] : uvec4(0); \
        }                                                                                  \
        barrier();                                                                         \
        [[unroll]] for (uint w = 0; w < WQ; w++) {                                         \
            const uint row = sg * RQ + w * TM;                                             \
            if (row >= c0 && row < c0 + QCH)                                               \
                [[unroll]] for (uint kk = 0; kk < D / TK; kk++)                            \
                    coopMatLoad(FRAG[w][kk], sm, (row - c0) * DROW + kk * (TK / 8), DROW,  \
                                gl_CooperativeMatrixLayoutRowMajor);                       \
        }                                                                                  \
    }

// Stores acc * scale of this subgroup's owned rows to BUF (head at hb, rows pv
// vectors apart) in the element type: straight to memory where the workgroup's rows
// all exist, through the scratch (rows past OWN_ROWS dropped) where they do not.
#define STORE_OWNED(BUF, ACC, hb, pv, first_row, mul)                                      \
    [[unroll]] for (uint w = 0; w < WQ; w++) {                                             \
        const uint row0 = r0 + w * TM;                                                     \
        [[unroll]] for (uint j = 0; j < D / TN; j++) {                                     \
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> of =         \
                ACC[w][j] * (mul);                                                         \
            ROUND_FRAG_BF16(of);                                                           \
            coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> oh =          \
                coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(of);      \
            if ((first_row) + BR <= OWN_ROWS) {                                            \
                coopMatStore(oh, BUF, (hb) + row0 * (pv) + j * (TN / 8), (pv),             \
                             gl_CooperativeMatrixLayoutRowMajor);                          \
            } else {                                                                       \
                coopMatStore(oh, sm, SUB, TN / 8, gl_CooperativeMatrixLayoutRowMajor);     \
                sub_sync();                                                                \
                for (uint i = lane; i < TM * (TN / 8); i += SUBGROUP) {                    \
                    uint r = i / (TN / 8), c = i % (TN / 8);                               \
                    if (row0 + r < OWN_ROWS) BUF[(hb) + (row0 + r) * (pv) + j * (TN / 8) + c] = sm[SUB + i]; \
                }                                                                          \
                sub_sync();                                                                \
            }                                                                              \
        }                                                                                  \
    }
