#version 460
// matmul_coop2.comp — C = A*B with NV cooperative matrix 2 (opt-in family).
//
// Workgroup-scope matrices: one BM x BK A block, one BK x BN B block and the
// BM x BN accumulator belong to the whole workgroup, and the driver stages
// them through shared memory itself. Tensor-layout loads and stores
// (coopMatLoadTensorNV with constant clamping) handle every tail: elements
// past M, N or K load as zero and stores past the edges are dropped, so there
// is no separate edge path. Split-K is not offered on this path.
// Build-time defines: ACC_F16 (fp16 accumulators), OUT_F16 (fp16 output).
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
// BM, BN, BK, RASTER and the workgroup size: shaders/families.py.
#include "spec_matmul_coop2.glsl"
#include "matmul_common.glsl"

#ifdef ACC_F16
#define ACC_T float16_t
#else
#define ACC_T float
#endif


const int CLAMP = gl_CooperativeMatrixClampModeConstantNV;

void main() {
    const uint gx = gl_NumWorkGroups.x, gy = gl_NumWorkGroups.y;
    uint bx = gl_WorkGroupID.x, by = gl_WorkGroupID.y;
    if (RASTER > 1u) {   // groups of RASTER block rows, as in matmul_coop.comp
        const uint pid = gl_WorkGroupID.y * gx + gl_WorkGroupID.x;
        const uint per_group = RASTER * gx;
        const uint first = (pid / per_group) * RASTER;
        const uint rows = min(gy - first, RASTER);
        const uint local = pid % per_group;
        by = first + local % rows;
        bx = local / rows;
    }
    const uint m0 = by * BM, n0 = bx * BN;

    tensorLayoutNV<2, CLAMP> la = createTensorLayoutNV(2, CLAMP);
    tensorLayoutNV<2, CLAMP> lb = createTensorLayoutNV(2, CLAMP);
    tensorLayoutNV<2, CLAMP> lc = createTensorLayoutNV(2, CLAMP);
    la = setTensorLayoutDimensionNV(la, p.M, p.K);
    lb = setTensorLayoutDimensionNV(lb, p.K, p.N);
    lc = setTensorLayoutDimensionNV(lc, p.M, p.N);

    coopmat<ACC_T, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<ACC_T, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
    [[dont_unroll]] for (uint k0 = 0; k0 < p.K; k0 += BK) {
        coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> fa;
        coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> fb;
        coopMatLoadTensorNV(fa, ah, 0, sliceTensorLayoutNV(la, m0, BM, k0, BK));
        coopMatLoadTensorNV(fb, bh, 0, sliceTensorLayoutNV(lb, k0, BK, n0, BN));
        acc = coopMatMulAdd(fa, fb, acc);
    }
    coopmat<OUT_T, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> out_tile =
        coopmat<OUT_T, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
    coopMatStoreTensorNV(out_tile, c, 0, sliceTensorLayoutNV(lc, m0, BM, n0, BN));
}
