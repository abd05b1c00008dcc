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
#endif
