// bf16.glsl — bfloat16 as 16-bit words: the top half of an fp32. The conversions
// need no bfloat16 extension (the scalar kernels use them with any glslc); a
// 16-bit store of the result needs 16-bit integers, which a kernel that writes
// bfloat16 elements one at a time enables (IN_BF16 / OUT_BF16 builds only).
#if defined(IN_BF16) || defined(OUT_BF16)
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#ifndef HELIOS_BF16_GLSL
#define HELIOS_BF16_GLSL
float bf16_to_f32(uint bits) { return uintBitsToFloat(bits << 16); }
// Round to nearest even; NaN stays a (quiet) NaN, overflow rounds to infinity.
uint f32_to_bf16(float x) {
    const uint u = floatBitsToUint(x);
    return isnan(x) ? ((u >> 16) | 0x40u) : ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
// Two values as two bfloat16 in one word (a low), rounded to nearest even. A kernel
// that enables GL_EXT_bfloat16 defines HELIOS_BF16_NATIVE first: the conversion is
// then one instruction on the GPU (the attention softmax packs P with it; by bits it
// cost 12-14% at d=128 on the H100, h100-bf16-708816f).
uint pack_bf16x2(float a, float b) {
#ifdef HELIOS_BF16_NATIVE
    return packUint2x16(bfloat16BitsToUintEXT(bf16vec2(a, b)));
#else
    return f32_to_bf16(a) | (f32_to_bf16(b) << 16);
#endif
}
#endif
