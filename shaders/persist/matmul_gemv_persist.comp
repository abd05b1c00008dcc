#version 460
// matmul_gemv_persist.comp — a plan's one-row products one after another in one
// dispatch (plan_persist.c; the runtime in persist_runtime.glsl): the matrix-vector
// kernel's body (matmul_gemv.glsl) for each member in turn, with its LayerNorm head
// where the member has one, and a grid barrier between members. The grid is a few workgroups per SM, all resident at once, so a
// waiting workgroup never holds back one it waits for; each workgroup steps over a
// member's columns. A member's first weight words are in flight across the barrier.
// A plain member copies its A into shared memory, as a head normalizes into it. An
// attention member (decode_attention.glsl) steps over its heads' splits.
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require  // the attention's 16-bit words
#ifdef PERSIST_TRACE
#extension GL_EXT_shader_realtime_clock : require  // the device clock each member's stamps read
#endif
#include "spec_matmul_gemv_persist.glsl"
const uint ROWS = 1u;
const uint LONG_SPLITS = 1u;  // a run's attentions: the device sizes splits for the run's grid
uint EPI, ACT;  // the member's epilogue bits and activation (persist_member)
#define PERSIST
#define LN_HEAD
#include "../gemv/matmul_gemv.glsl"
