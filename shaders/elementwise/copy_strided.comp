#version 460
// copy_strided.comp — dst[dst_off + i0*ds0 + i1*ds1 + i2*ds2 + i3] =
// src[src_off + i0*ss0 + i1*ss1 + i2*ss2 + i3] over a 4-D index space of 16-bit
// elements (bits copied: float16 and bfloat16 alike). The innermost dimension is
// contiguous on both sides: the layout changes a model makes between its products
// and attention (heads split out of a QKV product, (B, H, S, d) <-> (B, S, H*d))
// are of this form. VEC: eight elements per invocation as one 16-byte load and
// store, where the host found the innermost size, every stride and both offsets
// multiples of 8.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#include "spec_copy_strided.glsl"

layout(local_size_x = 256) in;

#include "push_copy_strided.glsl"  // the push words (shaders/layouts.py)

layout(binding = BINDING_SRC) readonly buffer S16 { uint16_t s16[]; };
layout(binding = BINDING_SRC) readonly buffer S128 { uvec4 s128[]; };
layout(binding = BINDING_DST) writeonly buffer D16 { uint16_t d16[]; };
layout(binding = BINDING_DST) writeonly buffer D128 { uvec4 d128[]; };

void main() {
    const uint w = p.vec != 0u ? 8u : 1u;
    const uint inner = p.size3 / w;
    // the host keeps every index below 2^32 (elements and invocations)
    const uint q = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (q >= p.size0 * p.size1 * p.size2 * inner) return;
    uint r = q / inner;
    const uint i3 = (q - r * inner) * w;
    const uint i2 = r % p.size2;
    r /= p.size2;
    const uint i1 = r % p.size1, i0 = r / p.size1;
    const uint s = p.src_off + i0 * p.src_s0 + i1 * p.src_s1 + i2 * p.src_s2 + i3;
    const uint d = p.dst_off + i0 * p.dst_s0 + i1 * p.dst_s1 + i2 * p.dst_s2 + i3;
    if (p.vec != 0u)
        d128[d / 8u] = s128[s / 8u];
    else
        d16[d] = s16[s];
}
