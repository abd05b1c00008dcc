#version 460
// mma_roof.comp — the ceiling of the cooperative-matrix instructions a device
// runs: each subgroup multiplies register-resident fragments ITERS times into
// CHAINS independent accumulators (enough independent MMAs in flight to fill the
// pipeline), with no memory traffic in the loop; one store at the end keeps the
// work from being optimized away. helios roof times it: FLOPs per dispatch =
// workgroups * 4 subgroups * CHAINS * ITERS * 2 * TM * TN * TK.
// Build-time define: ACC_F16 (fp16 accumulators).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
#include "spec_mma_roof.glsl"   // TM, TN, TK, SUBGROUP, ITERS, the workgroup size

#ifdef ACC_F16
#define ACC_T float16_t
#else
#define ACC_T float
#endif

layout(set = 0, binding = BINDING_OUT) buffer Out { ACC_T result[]; };

const uint CHAINS = 4;

void main() {
    // Inputs that depend on the invocation, so the compiler cannot fold the loop.
    const float16_t seed = float16_t(float(gl_SubgroupID + 1u) / 1024.0);
    coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a = coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>(seed);
    coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> b = coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>(float16_t(1.0 / 4096.0));
    coopmat<ACC_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> c[CHAINS];
    [[unroll]] for (uint j = 0; j < CHAINS; j++) c[j] = coopmat<ACC_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(ACC_T(0.0));
    for (uint i = 0; i < ITERS; i++) {
        [[unroll]] for (uint j = 0; j < CHAINS; j++) c[j] = coopMatMulAdd(a, b, c[j]);
    }
    [[unroll]] for (uint j = 1; j < CHAINS; j++) c[0] = c[0] + c[j];
    const uint wg = gl_WorkGroupID.x * (gl_WorkGroupSize.x / SUBGROUP) + gl_SubgroupID;
    coopMatStore(c[0], result, wg * TM * TN, TN, gl_CooperativeMatrixLayoutRowMajor);
}
