#version 460
// activation.comp — an activation over n 16-bit elements, in fp32: PASS 0 writes
// y = act(z); PASS 1 writes y = g * act'(z), the activation's backward at its
// saved input (what a training step needs between two products when the
// activation's input is kept). Float16, or bfloat16 (IN_BF16) as 16-bit words,
// rounded once to nearest even. Two elements per invocation (one 32-bit word of
// each operand); a last odd element alone.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_control_flow_attributes : enable
#include "spec_activation.glsl"
#include "../common/bf16.glsl"
#include "activation.glsl"

layout(local_size_x = 256) in;

#include "push_activation.glsl"  // the push words (shaders/layouts.py)

layout(binding = BINDING_Z) readonly buffer Z32 { uint z32[]; };
layout(binding = BINDING_Z) readonly buffer Z16 { uint16_t z16[]; };
layout(binding = BINDING_G) readonly buffer G32 { uint g32[]; };
layout(binding = BINDING_G) readonly buffer G16 { uint16_t g16[]; };
layout(binding = BINDING_Y) writeonly buffer Y32 { uint y32[]; };
layout(binding = BINDING_Y) writeonly buffer Y16 { uint16_t y16[]; };
layout(binding = BINDING_Z) readonly buffer Z128 { uvec4 z128[]; };
layout(binding = BINDING_G) readonly buffer G128 { uvec4 g128[]; };
layout(binding = BINDING_Y) writeonly buffer Y128 { uvec4 y128[]; };

vec2 unpack2(uint w) {
#ifdef IN_BF16
    return vec2(bf16_to_f32(w & 0xFFFFu), bf16_to_f32(w >> 16));
#else
    return vec2(unpackFloat2x16(w));
#endif
}
uint pack2(vec2 v) {
#ifdef IN_BF16
    return pack_bf16x2(v.x, v.y);
#else
    return packFloat2x16(f16vec2(v));  // the native conversion rounds to nearest even
#endif
}

float apply(float z, float g) { return PASS == 0u ? activate(z) : g * activate_grad(z); }

void main() {
    const uint q = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (p.vec != 0u) {  // 8 elements, one 16-byte load per operand (the memory-bound case: 1.5x fewer requests)
        if (8u * q < p.n) {
            const uvec4 z = z128[q];
            const uvec4 g = PASS == 0u ? uvec4(0u) : g128[q];
            uvec4 y;
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                const vec2 zz = unpack2(z[i]), gg = unpack2(g[i]);
                y[i] = pack2(vec2(apply(zz.x, gg.x), apply(zz.y, gg.y)));
            }
            y128[q] = y;
        }
        return;
    }
    const uint e = 2u * q;
    if (e + 1u < p.n) {
        const vec2 z = unpack2(z32[q]);
        const vec2 g = PASS == 0u ? vec2(0.0) : unpack2(g32[q]);
        y32[q] = pack2(vec2(apply(z.x, g.x), apply(z.y, g.y)));
    } else if (e < p.n) {
        const float z = unpack2(uint(z16[e])).x;
        const float g = PASS == 0u ? 0.0 : unpack2(uint(g16[e])).x;
        y16[e] = uint16_t(pack2(vec2(apply(z, g), 0.0)) & 0xFFFFu);
    }
}
