#version 460
// matmul_scalar.comp — fallback for devices without cooperative matrices (or
// HELIOS_DISABLE_COOP=1): a 64x64 block per workgroup of 16x16 invocations,
// each computing 4x4 outputs in fp32 from fp16 or bfloat16 (IN_BF16) inputs
// widened to fp32 and staged in shared memory.
// Layouts, batches (grid z) and the epilogue as in matmul_common.glsl.
#include "spec_matmul_scalar.glsl"
#include "matmul_common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
const uint BM = 64, BN = 64, BK = 16;

shared float As[BK][BM + 1];
shared float Bs[BK][BN + 1];

uint abase, bbase;

float a_at(uint r, uint k) {
    if (r >= p.M || k >= p.K) return 0.0;
    return in_a(abase + (TRANS_A ? k * p.lda + r : r * p.lda + k));
}
float b_at(uint k, uint q) {
    if (k >= p.K || q >= p.N) return 0.0;
    return in_b(bbase + (TRANS_B ? q * p.ldb + k : k * p.ldb + q));
}

void main() {
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    const uint tid = ty * 16u + tx;
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    const uint bidx = gl_WorkGroupID.z;
    abase = bidx * p.sa;
    bbase = bidx * p.sb;
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
    const uint cbase = bidx * p.M * p.N;
    [[unroll]] for (uint i = 0; i < 4u; i++) {
        uint r = m0 + ty + 16u * i;
        [[unroll]] for (uint j = 0; j < 4u; j++) {
            uint q = n0 + tx + 16u * j;
            uint ci = cbase + r * p.N + q;
            if (r < p.M && q < p.N) store_c(ci, epilogue(acc[i][j], ci, q));
        }
    }
}
