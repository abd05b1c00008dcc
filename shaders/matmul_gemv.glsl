// matmul_gemv.glsl — the matrix-vector kernel's body (matmul_gemv.comp describes it),
// shared with matmul_gemv_ln.comp, which adds a LayerNorm head (LN_HEAD), and with
// matmul_gemv_persist.comp, which runs products one after another (PERSIST, with LN_HEAD).
#include "matmul_common.glsl"
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

#ifndef LN_HEAD
// FLAG_A_SWIGLU (one row): A's elements k .. k+8 are silu(g) u of the bound row [g | u]
// of 2K, each rounded to A's type as the SwiGLU op stores it.
void swiglu_a8(uint k, out float a[8]) {
    float g[8], u[8];
    widen8(a128[(abase + k) / 8u], g);
    widen8(a128[(abase + p.K + k) / 8u], u);
    [[unroll]] for (uint j = 0; j < 8u; j++) {
        const float v = g[j] / (1.0 + exp(-g[j])) * u[j];
#ifdef IN_BF16
        a[j] = round_bf16(v);
#else
        a[j] = float(float16_t(v));
#endif
    }
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

void store_rows(float acc[ROWS], uint m0, uint n) {
    const uint cbase = gl_WorkGroupID.z * p.M * p.N;
    [[unroll]] for (uint r = 0; r < ROWS; r++) {
        if (m0 + r >= p.M) break;
        const uint ci = cbase + (m0 + r) * p.N + n;
        store_c(ci, epilogue(acc[r], ci, n));
    }
}

// B as N x K: one step's words of column n's row (at word row8) into bw.
void load_step(uint row8, uint w, uint lane) {
    [[unroll]] for (uint u = 0; u < UNROLL; u++) bw[u] = b128[row8 + w + u * SUBGROUP + lane];
}

// B as N x K: column n, the subgroup's lanes along K.
void column_of_b(uint m0, uint n) {
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
    if (lane == 0u) store_rows(acc, m0, n);
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
#include "push_persist.glsl"
layout(binding = BINDING_TABLE) readonly buffer PersistTable { uint table[]; };  // PERSIST_ROW words a member
layout(binding = BINDING_COUNTERS) coherent buffer PersistCounters { uint arrivals[]; };  // zeroed before each replay
layout(binding = BINDING_PARAMS) buffer PersistWords { uint words[]; };

// A member's table row (persist_row.glsl, from shaders/layouts.py): a product's words or
// an attention's, FLAG_PERSIST_ATTN in the flags word both share saying which.
#include "persist_row.glsl"
const uint PERSIST_SPIN_LIMIT = 1u << 20;  // polls before a grid barrier gives up (docs/guide/decode.md)

uint att_heads, att_kv_heads, att_rows, att_splits, att_counters, att_fit;
float att_scale;
bool att_rope;
#define ATT_HEADS att_heads
#define ATT_KV_HEADS att_kv_heads
#define ATT_ROWS att_rows
#define ATT_SPLITS att_splits
#define ATT_SCALE att_scale
#define ATT_FIT att_fit
#define ATT_SRC16(i) ps_a16[pm + PERSIST_A].v[i]
#define ATT_SRC128(i) ps_a128[pm + PERSIST_A].v[i]
#define ATT_KC(i) ps_kv16[pm + PERSIST_B].v[i]
#define ATT_VC(i) ps_kv16[pm + PERSIST_C].v[i]
#define ATT_KC128(i) ps_b128[pm + PERSIST_B].v[i]
#define ATT_VC128(i) ps_b128[pm + PERSIST_C].v[i]
#define ATT_WORK(i) ps_work[pm + PERSIST_X].v[i]
#define ATT_OUT16(i) ps_kv16[pm + PERSIST_BIAS].v[i]
#define ATT_ROPE att_rope
#define ATT_TAB(i) ps_bias[pm + PERSIST_R].v[i]
#include "decode_attention.glsl"
shared bool att_last;  // this workgroup's split is its head's last to arrive

// Member m's words and slots: a product's (one row of A, B as N x K in whole words), or
// an attention's from the same row.
void persist_member(uint m) {
    const uint r = m * PERSIST_ROW;
    p.M = 1u;
    p.N = PERSIST_PRODUCT_N(r);
    p.K = PERSIST_PRODUCT_K(r);
    p.flags = PERSIST_PRODUCT_FLAGS(r);
    p.ldb = PERSIST_PRODUCT_LDB(r);
    EPI = PERSIST_PRODUCT_EPI(r);
    ACT = PERSIST_PRODUCT_ACT(r);
    p.ln_eps = PERSIST_PRODUCT_LN_EPS(r);
    p.lda = p.K;
    p.k_chunk = p.K;
    p.splits = p.batch = 1u;
    p.sa = p.sb = 0u;
    p.alpha = 1.0;
    p.beta = 0.0;
    pm = m * PERSIST_ROLES;
    att_heads = PERSIST_ATTENTION_HEADS(r);
    att_rows = PERSIST_ATTENTION_ROWS(r);
    att_splits = PERSIST_ATTENTION_SPLITS(r);
    att_scale = PERSIST_ATTENTION_SCALE(r);
    att_counters = PERSIST_ATTENTION_COUNTERS(r);
    att_fit = PERSIST_ATTENTION_FIT(r);
    att_kv_heads = PERSIST_ATTENTION_KV_HEADS(r);
    att_rope = (p.flags & FLAG_PERSIST_ROPE) != 0u;
}

// Every invocation: an attention member at position pos, the grid stepping over its
// heads' splits up to the position; the last split of a head to arrive combines them
// (decode.comp's PASS 4, each split counted on its head's word).
void persist_attention(uint pos) {
    const uint t = gl_LocalInvocationID.x;
    if (pos >= att_rows) {  // past the cache (the host checks): NaN, as decode.comp writes
        for (uint h = gl_WorkGroupID.x; h < att_heads; h += gl_NumWorkGroups.x) attention_combine(h, pos);
        return;
    }
    const uint splits = att_split_of(pos) + 1u;
    for (uint task = gl_WorkGroupID.x; task < att_heads * splits; task += gl_NumWorkGroups.x) {
        const uint h = task / splits;
        attention_split(h, task % splits, pos);
        memoryBarrierBuffer();  // this split's partials, before its arrival is counted
        barrier();
        if (t == 0u) att_last = atomicAdd(arrivals[att_counters + h], 1u) == splits - 1u;
        barrier();
        if (att_last) {
            memoryBarrierBuffer();  // the other splits' partials, after their arrivals
            attention_combine(h, pos);
        }
        barrier();  // shared memory free for the next task
    }
}

// Every invocation: A's K elements into ln_a, where fma8 reads them (FLAG_A_SWIGLU:
// silu(g) u of the bound row [g | u], rounded to A's type as the SwiGLU op stores it).
void persist_stage_a() {
    const bool glu = (p.flags & FLAG_A_SWIGLU) != 0u;
    for (uint j = gl_LocalInvocationID.x; j < p.K / 4u; j += gl_WorkGroupSize.x) {
        if (glu) {
            const vec4 g = load16x4(a64[j]), u = load16x4(a64[p.K / 4u + j]);
            ln_a[j] = store16x4(g / (1.0 + exp(-g)) * u);
        } else {
            ln_a[j] = a64[j];
        }
    }
    barrier();
}

// Every invocation, after the workgroup's last write of a member: counted in. The
// workgroup's writes are ordered before the count by the barrier, the count releases
// them at device scope.
void grid_arrive() {
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   gl_SemanticsAcquireRelease);
    if (gl_LocalInvocationIndex == 0u)
        atomicAdd(arrivals[0], 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelease);
}

// Every invocation: until every workgroup has counted itself in `done` times, polled
// with acquire loads. One that gives up sets the fault word, which the replay reports;
// once it is set, the other barriers of the replay give up at their next look at it
// (every 4096 polls), so that a grid too large fails in one barrier's time, not in
// every barrier's.
void grid_wait(uint done) {
    if (gl_LocalInvocationIndex == 0u) {
        const uint want = done * gl_NumWorkGroups.x;
        uint polls = 0u;
        while (atomicLoad(arrivals[0], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquire) < want) {
            ++polls;
            if (polls == PERSIST_SPIN_LIMIT ||
                ((polls & 4095u) == 0u && atomicLoad(words[pp.fault_word], gl_ScopeDevice, 0,
                                                     gl_SemanticsRelaxed) != 0u)) {
                atomicStore(words[pp.fault_word], 1u, gl_ScopeDevice, 0, gl_SemanticsRelaxed);
                break;
            }
        }
    }
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   gl_SemanticsAcquireRelease);
}

// The members in turn, the workgroups stepping over each one's columns by the grid's
// width. A member's first weight words go out before the barrier: nothing in the
// run writes them (plan_persist.c).
void main() {
    abase = bbase = 0u;
    const uint lane = gl_SubgroupInvocationID, first = gl_WorkGroupID.x * NSG + gl_SubgroupID;
    for (uint m = 0u; m < pp.members; m++) {
        persist_member(m);
        if ((p.flags & FLAG_PERSIST_ATTN) != 0u) {
            const uint pos = words[PERSIST_ATTENTION_POS_SLOT(m * PERSIST_ROW)];  // no member writes it: read before the wait
            if (m > 0u) grid_wait(m);
            persist_attention(pos);
            if (m + 1u < pp.members) grid_arrive();
            continue;
        }
        ahead = first < p.N && SUBGROUP * UNROLL <= p.K / 8u;
        if (ahead) load_step(first * p.ldb / 8u, 0u, lane);
        if (m > 0u) grid_wait(m);
        if ((p.flags & FLAG_PERSIST_LN) != 0u)
            ln_head();
        else
            persist_stage_a();
        for (uint n = first; n < p.N; n += gl_NumWorkGroups.x * NSG) column_of_b(0u, n);
        if (m + 1u < pp.members) grid_arrive();
    }
}
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
