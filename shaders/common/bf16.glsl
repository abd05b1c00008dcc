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
// Rounding is always done here, by bits: NVIDIA's native f32 -> bf16 conversion
// (OpFConvert, coopmat conversions) rounds toward zero (tests/test_rounding.py; on
// the H100, driver 580: every bf16 product and attention output 0.5-1 ulp low on
// average), and SPIR-V leaves the default rounding to the implementation.

// Two values as two bfloat16 in one word (a low), rounded to nearest even.
uint pack_bf16x2(float a, float b) { return f32_to_bf16(a) | (f32_to_bf16(b) << 16); }

// The same for finite values in the attention's inner loop (softmax probabilities):
// no NaN test, and ties rounded away from zero instead of to even (one add per
// value; an exact tie, the low 16 bits 0x8000, is rare in computed exponentials, so
// the bias is negligible). The native conversion was one instruction for two
// values but rounds toward zero.
uint pack_bf16x2_finite(float a, float b) {
    return ((floatBitsToUint(a) + 0x8000u) >> 16) | ((floatBitsToUint(b) + 0x8000u) & 0xFFFF0000u);
}

// x rounded to the nearest bfloat16 (ties to even), as an fp32 that any f32 -> bf16
// conversion then converts exactly (NaN stays NaN).
float round_bf16(float x) {
    const uint u = floatBitsToUint(x);
    return isnan(x) ? x : uintBitsToFloat((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
}

// x rounded to the nearest float16, as an fp32 (through packHalf2x16: a compiler may
// fold the plainer float(float16_t(x)) back to x, and lavapipe's does).
float round_f16(float x) { return unpackHalf2x16(packHalf2x16(vec2(x, 0.0))).x; }

// Two values as two elements of the kernel's 16-bit input type in one word (a low),
// rounded to nearest even, and back: bfloat16 in IN_BF16 builds, fp16 otherwise.
uint pack_in2(float a, float b) {
#ifdef IN_BF16
    return pack_bf16x2(a, b);
#else
    return packHalf2x16(vec2(a, b));
#endif
}
vec2 unpack_in2(uint u) {
#ifdef IN_BF16
    return vec2(bf16_to_f32(u & 0xFFFFu), bf16_to_f32(u >> 16));
#else
    return unpackHalf2x16(u);
#endif
}

// Rounds each element of an fp32 cooperative matrix to the nearest bfloat16 in place
// (IN_BF16 / OUT_BF16 kernels: before the fragment's conversion to bfloat16, which
// then is exact); nothing for fp16, whose native conversion rounds to nearest even.
#if defined(IN_BF16) || defined(OUT_BF16)
#define ROUND_FRAG_BF16(f) \
    for (int i_ = 0; i_ < (f).length(); i_++) (f)[i_] = round_bf16((f)[i_])
#else
#define ROUND_FRAG_BF16(f)
#endif
#endif
