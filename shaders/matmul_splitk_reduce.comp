#version 460
// matmul_splitk_reduce.comp — C = sum of the split-K partial products.
// The workspace holds `splits` fp32 M x N products back to back; each
// invocation sums four consecutive elements over the splits (vec4 loads when
// M*N is a multiple of 4) in fp32 and rounds once to the output type.
#include "matmul_common.glsl"

layout(local_size_x = 256) in;

void main() {
    const uint mn = p.M * p.N;
    const uint q = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    const uint e0 = q * 4u;
    if (e0 >= mn) return;
    if (mn % 4u == 0u) {
        vec4 s = ws4[q];
        for (uint z = 1; z < p.splits; z++) s += ws4[z * (mn / 4u) + q];
        [[unroll]] for (uint i = 0; i < 4u; i++) c[e0 + i] = OUT_T(s[i]);
    } else {
        for (uint e = e0; e < min(e0 + 4u, mn); e++) {
            float s = ws[e];
            for (uint z = 1; z < p.splits; z++) s += ws[z * mn + e];
            c[e] = OUT_T(s);
        }
    }
}
