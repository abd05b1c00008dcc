#version 460
// coop_layout.comp — where a device keeps the elements of a TM x TN fp32 accumulator:
// one subgroup loads a matrix whose element (r, c) holds r * TN + c, and (TM == TK)
// gets the same matrix as an MMA's result (the identity times it as a B fragment);
// each lane writes what element i of each holds. The attention forward keeps its
// softmax rows in registers only where this layout has the shape it relies on
// (csrc/core/kernels/layout.c reads it). Output: [0] the elements per lane, then lane-major
// (lane * E + i) the loaded matrix's ids, then the MMA's (-1 where TM != TK).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "spec_coop_layout.glsl"   // TM, TN, TK, SUBGROUP, the workgroup size (one subgroup)

layout(set = 0, binding = BINDING_OUT) writeonly buffer Out { float result[]; };

shared float ids[TM * TN];
shared float16_t eye[TM * TK], idh[TK * TN];

void main() {
    const uint lane = gl_SubgroupInvocationID;
    for (uint i = lane; i < TM * TN; i += SUBGROUP) ids[i] = float(i);
    for (uint i = lane; i < TM * TK; i += SUBGROUP) eye[i] = float16_t(i / TK == i % TK ? 1.0 : 0.0);
    for (uint i = lane; i < TK * TN; i += SUBGROUP) idh[i] = float16_t(float(i));   // exact below 2048
    barrier();
    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> loaded, product;
    coopMatLoad(loaded, ids, 0, TN, gl_CooperativeMatrixLayoutRowMajor);
    coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a;
    coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> b;
    coopMatLoad(a, eye, 0, TK, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(b, idh, 0, TN, gl_CooperativeMatrixLayoutRowMajor);
    product = coopMatMulAdd(a, b, coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0));
    const uint n = uint(loaded.length());
    if (lane == 0u) result[0] = float(n);
    for (uint i = 0; i < n; i++) {
        result[1u + lane * n + i] = loaded[i];
        result[1u + SUBGROUP * n + lane * n + i] = TM == TK ? product[i] : -1.0;
    }
}
