#version 460
// matmul_gemv.comp — products of a few rows (M <= 8: a decode step's matrix-vector
// products): no tiles, the weights streamed once at the width of the memory bus, each
// output accumulated in fp32 and reduced across the lanes that read its row of B.
// A workgroup takes ROWS rows of A (grid y: ceil(M / ROWS), grid z: the batch).
//
// TRANS_B (B stored N x K, a Linear's (out, in) weight): one subgroup per output
//   column, its lanes along K in 16-byte loads (8 elements) where B's rows allow
//   (FLAG_B_VEC), UNROLL loads in flight per lane; subgroupAdd gives the sum.
// B stored K x N: a lane per column (consecutive lanes, consecutive addresses), the
//   workgroup's subgroups splitting K; the partial sums meet in shared memory.
// Layouts, batches and the epilogue as in matmul_common.glsl; fp32 arithmetic.
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "spec_matmul_gemv.glsl"
#include "matmul_gemv.glsl"
