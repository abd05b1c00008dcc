// matmul_common.glsl — bindings and push constants shared by every matmul kernel.
// C = A * B, row-major: A is M x K, B is K x N, C is M x N. Inputs are fp16.
// The same buffer is declared at one binding with several element types: 16-byte
// vectors for aligned bulk loads, 16-bit scalars for tails.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable

#ifdef OUT_F16
#define OUT_T float16_t
#else
#define OUT_T float
#endif

layout(push_constant) uniform Params {
    uint M, N, K;
    uint flags;     // FLAG_* below, computed on the host from the shapes
    uint k_chunk;   // split-K: K elements per split (a multiple of the tile's K); K without split
    uint splits;    // split-K: number of partial products in the workspace (1: none)
} p;

const uint FLAG_A_VEC = 1u;     // K % 8 == 0: A rows are 16-byte aligned
const uint FLAG_B_VEC = 2u;     // N % 8 == 0: B rows are 16-byte aligned
const uint FLAG_C_DIRECT = 4u;  // C rows aligned for cooperative stores
const uint FLAG_SPLIT = 8u;     // write fp32 partial products to the workspace, not C

layout(binding = 0) readonly buffer A16 { uint16_t a16[]; };
layout(binding = 0) readonly buffer A128 { uvec4 a128[]; };
layout(binding = 0) readonly buffer AH { float16_t ah[]; };
layout(binding = 1) readonly buffer B16 { uint16_t b16[]; };
layout(binding = 1) readonly buffer B128 { uvec4 b128[]; };
layout(binding = 1) readonly buffer BH { float16_t bh[]; };
layout(binding = 2) writeonly buffer C { OUT_T c[]; };
// Split-K workspace: `splits` fp32 partial products of M x N, one after another.
layout(binding = 3) buffer W { float ws[]; };
layout(binding = 3) buffer W4 { vec4 ws4[]; };
