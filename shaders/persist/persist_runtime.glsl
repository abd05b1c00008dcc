// persist_runtime.glsl — the persistent runtime of matmul_gemv_persist.comp, included by
// matmul_gemv.glsl under PERSIST: the run's table of members (persist_row.glsl), each
// member's words, an attention member's splits (decode_attention.glsl), the grid barrier
// (arrive, then wait with acquire loads and a fault word that gives up), and the main
// loop over the members with each product's first weight words loaded before the wait.
#ifndef HELIOS_PERSIST_RUNTIME_GLSL
#define HELIOS_PERSIST_RUNTIME_GLSL
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
void stamp(uint m, uint k);
#ifdef PERSIST_TRACE
uint trace_m;      // the member being stamped
bool trace_first;  // an attention's first task: the one its inner stamps time
#endif
// An attention's first task's stamp k, where the run is traced.
void trace_first_task(uint k) {
#ifdef PERSIST_TRACE
    if (trace_first) stamp(trace_m, k);
#endif
}
#define ATT_SCORED() trace_first_task(3u)
#define ATT_V_AFTER_SCORES  // 110 registers where K and V together took 126 (results/h100-registers-7ac4f44)
#include "../decode/decode_attention.glsl"
shared bool att_last;  // this workgroup's split is its head's last to arrive

// PERSIST_TRACE (HELIOS_PLAN_TRACE): invocation 0's stamp k of member m, in ns of the
// device clock (0 before its wait, 1 after it, 2 after its work; inside it, 3 its inputs
// in: a product's A staged, an attention's first task's scores; 4 a product's first
// column stored, an attention's first task counted in), and with stamp 2 the member's N
// and K: TRACE_STAMP words a member and workgroup (persist_row.glsl), past the run's
// counters in device memory (the replay copies them out).
void stamp(uint m, uint k) {
#ifdef PERSIST_TRACE
    if (gl_LocalInvocationIndex != 0u) return;
    const uint i = pp.trace_word + (m * gl_NumWorkGroups.x + gl_WorkGroupID.x) * TRACE_STAMP;
    const uvec2 t = clockRealtime2x32EXT();
    arrivals[i + 2u * k] = t.x;
    arrivals[i + 2u * k + 1u] = t.y;
    if (k == 2u) {
        const bool attention = (p.flags & FLAG_PERSIST_ATTN) != 0u;
        arrivals[i + TRACE_N] = attention ? TRACE_ATTENTION : p.N;
        arrivals[i + TRACE_K] = attention ? att_heads : p.K;
    }
#endif
}

// Member m's words and slots: a product's (one row of A, B as N x K in whole words), or
// an attention's from the same row.
void persist_member(uint m) {
    const uint r = m * PERSIST_ROW;
    p.M = 1u;
    p.N = PERSIST_PRODUCT_N(r);
    p.K = PERSIST_PRODUCT_K(r);
    p.flags = PERSIST_PRODUCT_FLAGS(r) & RUN_FLAGS;  // the same bits; a branch on one no member sets folds away
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
#ifdef PERSIST_TRACE
    trace_first = true;
#endif
    for (uint task = gl_WorkGroupID.x; task < att_heads * splits; task += gl_NumWorkGroups.x) {
        const uint h = task / splits;
        attention_split(h, task % splits, pos);
        memoryBarrierBuffer();  // this split's partials, before its arrival is counted
        barrier();
        if (t == 0u) att_last = atomicAdd(arrivals[att_counters + h], 1u) == splits - 1u;
        barrier();
        trace_first_task(4u);
#ifdef PERSIST_TRACE
        trace_first = false;
#endif
        if (att_last) {
            memoryBarrierBuffer();  // the other splits' partials, after their arrivals
            attention_combine(h, pos);
        }
        barrier();  // shared memory free for the next task
    }
}

// Every invocation: A's K elements into ln_a, where fma8 reads them (FLAG_A_SWIGLU:
// silu(g) u of the bound row [g | u], swiglu_rounded).
// A was written by other workgroups: STAGE_BATCH words of the invocation's share are
// loaded before the first is used, one trip to L2 a batch, not one a word. Four: all
// eight at once took the kernel past two workgroups an SM's registers
// (results/h100-stage-a-fd0fda9).
const uint STAGE_BATCH = 4u;
void persist_stage_a() {
    const bool glu = (p.flags & FLAG_A_SWIGLU) != 0u;
    const uint t = gl_LocalInvocationID.x, words = p.K / 4u;
    for (uint j0 = t; j0 < words; j0 += LN_THREADS * STAGE_BATCH) {
        uvec2 g[STAGE_BATCH], u[STAGE_BATCH];
        [[unroll]] for (uint i = 0; i < STAGE_BATCH; i++) {
            const uint j = j0 + LN_THREADS * i;
            g[i] = j < words ? a64[j] : uvec2(0u);
            u[i] = glu && j < words ? a64[words + j] : uvec2(0u);
        }
        [[unroll]] for (uint i = 0; i < STAGE_BATCH; i++) {
            const uint j = j0 + LN_THREADS * i;
            if (j < words) {
                if (glu) {
                    const vec4 gv = load16x4(g[i]), uv = load16x4(u[i]);
                    vec4 h;
                    [[unroll]] for (uint e = 0; e < 4u; e++) h[e] = swiglu_rounded(gv[e], uv[e]);
                    ln_a[j] = store16x4(h);  // exact: h is in A's type
                } else {
                    ln_a[j] = g[i];
                }
            }
        }
    }
    barrier();
}

// FLAG_PERSIST_GLU: element n of the SwiGLU's row (the next member's A), silu(g) u of
// the member's columns n and n + N/2 as C holds them, as the SwiGLU op rounds it: the
// down product then copies its A rather than computing it in every workgroup.
void store_glu(uint n, float g, float u) {
#ifdef OUT_BF16
    ps_c[pm + PERSIST_GLU].v[n] = uint16_t(f32_to_bf16(swiglu_rounded(g, u)));
#else
    ps_c[pm + PERSIST_GLU].v[n] = OUT_T(swiglu_rounded(g, u));
#endif
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
#ifdef PERSIST_TRACE
        trace_m = m;
#endif
        persist_member(m);
        if ((p.flags & FLAG_PERSIST_ATTN) != 0u) {
            const uint pos = words[PERSIST_ATTENTION_POS_SLOT(m * PERSIST_ROW)];  // no member writes it: read before the wait
            stamp(m, 0u);
            if (m > 0u) grid_wait(m);
            stamp(m, 1u);
            persist_attention(pos);
            stamp(m, 2u);
            if (m + 1u < pp.members) grid_arrive();
            continue;
        }
        const bool pairs = (p.flags & FLAG_PERSIST_GLU) != 0u;
        const uint cols = pairs ? p.N / 2u : p.N;  // FLAG_PERSIST_GLU: columns in pairs (n, n + N/2)
        if ((p.flags & FLAG_PERSIST_LN) != 0u) ln_stage_affine();  // nothing in the run writes them
        ahead = first < cols && SUBGROUP * UNROLL <= p.K / 8u;
        if (ahead) load_step(first * p.ldb / 8u, 0u, lane);
        stamp(m, 0u);
        if (m > 0u) grid_wait(m);
        stamp(m, 1u);
        if ((p.flags & FLAG_PERSIST_LN) != 0u)
            ln_head();
        else
            persist_stage_a();
        stamp(m, 3u);
        for (uint n = first; n < cols; n += gl_NumWorkGroups.x * NSG) {
            const float c = column_of_b(0u, n);
            if (pairs) {
                const float u = column_of_b(0u, n + cols);
                if (lane == 0u) store_glu(n, c, u);
            }
            if (n == first) stamp(m, 4u);
        }
        stamp(m, 2u);
        if (m + 1u < pp.members) grid_arrive();
    }
}
#endif
