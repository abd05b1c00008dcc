#version 460
// matmul_splitk_reduce.comp — C = epilogue(sum of the split-K partial products).
// The workspace holds, per batch, `splits` fp32 M x N products back to back; each
// invocation sums four consecutive elements of one batch's C over the splits
// (vec4 loads when M*N is a multiple of 4) in fp32, applies the epilogue and
// rounds once to the output type.
#include "spec_matmul_splitk_reduce.glsl"
#include "matmul_common.glsl"

layout(local_size_x = 256) in;

void main() {
    const uint mn = p.M * p.N;
    const uint q = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    const uint e0 = q * 4u;   // element of the batched C (batch * mn elements)
    if (e0 >= p.batch * mn) return;
    if (mn % 4u == 0u) {
        const uint b = e0 / mn, off = e0 % mn;
        const uint w0 = (b * p.splits * mn + off) / 4u;
        vec4 s = ws4[w0];
        for (uint z = 1; z < p.splits; z++) s += ws4[w0 + z * (mn / 4u)];
        [[unroll]] for (uint i = 0; i < 4u; i++) store_c(e0 + i, epilogue(s[i], e0 + i, (off + i) % p.N));
    } else {
        for (uint e = e0; e < min(e0 + 4u, p.batch * mn); e++) {
            const uint b = e / mn, off = e % mn;
            float s = ws[b * p.splits * mn + off];
            for (uint z = 1; z < p.splits; z++) s += ws[(b * p.splits + z) * mn + off];
            store_c(e, epilogue(s, e, off % p.N));
        }
    }
}
