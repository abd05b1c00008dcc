#version 460
// EXPERIMENT (not product): a chain of matrix-vector products (y_{s+1} = W_s y_s, bf16)
// run by one persistent dispatch with a grid barrier between products, or one dispatch
// a product. A subgroup a column (the weights as N x K rows), UNROLL 16-byte words of
// the row per lane per step, the grid's subgroups stepping over the columns.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#ifdef VMM
#extension GL_KHR_memory_scope_semantics : require
#define ATOM_ADD(x, v) atomicAdd(x, v, gl_ScopeQueueFamily, gl_StorageSemanticsNone, gl_SemanticsRelaxed)
#define FENCE() memoryBarrier(gl_ScopeQueueFamily, gl_StorageSemanticsBuffer, gl_SemanticsAcquireRelease)
#else
#define ATOM_ADD(x, v) atomicAdd(x, v)
#define FENCE() memoryBarrierBuffer()
#endif
#ifdef VMM
#define COHERENT
#else
#define COHERENT coherent
#endif
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;      // 0: the grid waits between products; 1: no wait (timing only); 2: fill W
layout(constant_id = 1) const uint PREFETCH = 1;  // the first step's weight words loaded before the wait
layout(constant_id = 2) const uint SUBGROUP = 32;
layout(constant_id = 3) const uint SYNC = 0;     // 0: fence, one counter; 1: fence, 8 counters; 2: release/acquire atomics, one counter; 3: no fence (incorrect, timing only)
layout(constant_id = 4) const uint UNROLL = 4u;
const uint NSG = 256u / SUBGROUP;

layout(push_constant) uniform P { uint first, count, nwg, fill_words; } p;
layout(binding = 0) buffer W { uvec4 w[]; };
layout(binding = 1) COHERENT buffer X16 { uint16_t x16[]; };
layout(binding = 1) readonly buffer X128 { uvec4 x128[]; };  // each stage's own region: no workgroup holds stale lines of it
layout(binding = 2) COHERENT buffer Sync { uint arrivals[]; };
layout(binding = 3) readonly buffer St { uint st[]; };  // per product: N, K, weight word offset, x in, x out

float bf(uint h) { return uintBitsToFloat(h << 16); }
uint to_bf(float f) { uint u = floatBitsToUint(f); return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16; }

uint hash(uint x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}
uint bfword(uint h) { return (h & 0x8000u) | (120u << 7) | (h & 0x7Fu); }  // +-[2^-7, 2^-6)

void fill() {
    for (uint i = gl_GlobalInvocationID.x; i < p.fill_words; i += gl_NumWorkGroups.x * 256u) {
        uvec4 v;
        [[unroll]] for (uint j = 0; j < 4u; j++) {
            const uint h = hash(i * 4u + j);
            v[j] = bfword(h) | (bfword(h >> 16) << 16);
        }
        w[i] = v;
    }
}

const uint SPREAD = 8u;  // SYNC 1: counters a workgroup's index mod SPREAD picks, 64 words apart
uint arrived() {
    if (SYNC == 1u) {
        uint n = 0u;
        [[unroll]] for (uint i = 0; i < SPREAD; i++) n += ATOM_ADD(arrivals[p.fill_words + i * 64u], 0u);
        return n;
    }
#ifdef VMM
    if (SYNC == 2u) return atomicLoad(arrivals[p.fill_words], gl_ScopeQueueFamily, gl_StorageSemanticsBuffer, gl_SemanticsAcquire);
#endif
    return ATOM_ADD(arrivals[p.fill_words], 0u);
}

void grid_wait(uint done) {
    if (gl_LocalInvocationIndex == 0u) {
        while (arrived() < done * p.nwg) {}
        if (SYNC < 2u) FENCE();
    }
    barrier();
}

void arrive() {
    if (SYNC < 2u) FENCE();
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        if (SYNC == 1u) ATOM_ADD(arrivals[p.fill_words + (gl_WorkGroupID.x % SPREAD) * 64u], 1u);
#ifdef VMM
        else if (SYNC == 2u) atomicAdd(arrivals[p.fill_words], 1u, gl_ScopeQueueFamily, gl_StorageSemanticsBuffer, gl_SemanticsRelease);
#endif
        else ATOM_ADD(arrivals[p.fill_words], 1u);
    }
}

void main() {
    if (MODE == 2u) { fill(); return; }
    const uint lane = gl_SubgroupInvocationID;
    const uint sid = gl_WorkGroupID.x * NSG + gl_SubgroupID, sgs = gl_NumWorkGroups.x * NSG;
    for (uint s = p.first; s < p.first + p.count; s++) {
        const uint N = st[5u * s], K = st[5u * s + 1u], woff = st[5u * s + 2u];
        const uint xin = st[5u * s + 3u], xout = st[5u * s + 4u], words = K / 8u, step = SUBGROUP * UNROLL;
        uvec4 bw[UNROLL];
        bool ahead = PREFETCH != 0u && sid < N;
        if (ahead) [[unroll]] for (uint u = 0; u < UNROLL; u++) bw[u] = w[woff + sid * words + u * SUBGROUP + lane];
        if (MODE == 0u && s != p.first) grid_wait(s - p.first);
        for (uint n = sid; n < N; n += sgs) {
            float acc = 0.0;
            for (uint w0 = 0; w0 < words; w0 += step) {
                if (!ahead) [[unroll]] for (uint u = 0; u < UNROLL; u++) bw[u] = w[woff + n * words + w0 + u * SUBGROUP + lane];
                ahead = false;
                [[unroll]] for (uint u = 0; u < UNROLL; u++) {
                    const uvec4 a = x128[xin / 8u + w0 + u * SUBGROUP + lane];
                    [[unroll]] for (uint j = 0; j < 4u; j++) {
                        acc = fma(bf(a[j] & 0xFFFFu), bf(bw[u][j] & 0xFFFFu), acc);
                        acc = fma(bf(a[j] >> 16), bf(bw[u][j] >> 16), acc);
                    }
                }
            }
            acc = subgroupAdd(acc);
            if (lane == 0u) x16[xout + n] = uint16_t(to_bf(acc));
        }
        if (MODE == 0u && s + 1u != p.first + p.count) arrive();
    }
}
