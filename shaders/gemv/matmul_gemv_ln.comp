#version 460
// matmul_gemv_ln.comp — the matrix-vector kernel (matmul_gemv.comp) with the
// LayerNorm whose output is its A, in one dispatch: a plan's LayerNorm of one row
// followed by the product that reads it (matmul_gemv_ln_head.glsl). Each workgroup
// normalizes the row before its columns, so no barrier stands between the two; the
// workgroups step over the columns by the grid's width (a grid of a few per SM, so
// that few rows are normalized), and each subgroup has its first weight words in
// flight while the row is normalized.
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "spec_matmul_gemv_ln.glsl"
#define LN_HEAD
#include "matmul_gemv.glsl"
