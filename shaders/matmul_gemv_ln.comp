#version 460
// matmul_gemv_ln.comp — the matrix-vector kernel (matmul_gemv.comp) with the
// LayerNorm that reads its output as the residual branch, in one dispatch: a plan's
// product of one row followed by that norm (matmul_gemv_ln_tail.glsl). The workgroup
// that finishes last normalizes the row, so no barrier stands between the two.
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "spec_matmul_gemv_ln.glsl"
#define LN_TAIL
#define C_COHERENT coherent  // the last workgroup reads what the others wrote
#include "matmul_gemv.glsl"
