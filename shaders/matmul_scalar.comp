#version 460
// matmul_scalar.comp — fallback for devices without cooperative matrices (or
// HELIOS_DISABLE_COOP=1): a 64x64 block per workgroup of 16x16 invocations,
// each computing 4x4 outputs in fp32 from fp16 inputs staged in shared memory.
#include "matmul_common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
const uint BM = 64, BN = 64, BK = 16;

shared float As[BK][BM + 1];
shared float Bs[BK][BN + 1];

float a_at(uint r, uint k) { return r < p.M && k < p.K ? float(ah[r * p.K + k]) : 0.0; }
float b_at(uint k, uint q) { return k < p.K && q < p.N ? float(bh[k * p.N + q]) : 0.0; }

void main() {
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    const uint tid = ty * 16u + tx;
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    float acc[4][4];
    [[unroll]] for (uint i = 0; i < 4u; i++) [[unroll]] for (uint j = 0; j < 4u; j++) acc[i][j] = 0.0;

    for (uint k0 = 0; k0 < p.K; k0 += BK) {
        // 64x16 A elements and 16x64 B elements: 4 of each per invocation.
        [[unroll]] for (uint r = 0; r < 4u; r++) {
            uint i = tid + r * 256u;
            As[i % BK][i / BK] = a_at(m0 + i / BK, k0 + i % BK);
            Bs[i / BN][i % BN] = b_at(k0 + i / BN, n0 + i % BN);
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK; kk++) {
            float a[4], b[4];
            [[unroll]] for (uint i = 0; i < 4u; i++) a[i] = As[kk][ty + 16u * i];
            [[unroll]] for (uint j = 0; j < 4u; j++) b[j] = Bs[kk][tx + 16u * j];
            [[unroll]] for (uint i = 0; i < 4u; i++) [[unroll]] for (uint j = 0; j < 4u; j++)
                acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0; i < 4u; i++) {
        uint r = m0 + ty + 16u * i;
        [[unroll]] for (uint j = 0; j < 4u; j++) {
            uint q = n0 + tx + 16u * j;
            if (r < p.M && q < p.N) c[r * p.N + q] = OUT_T(acc[i][j]);
        }
    }
}
