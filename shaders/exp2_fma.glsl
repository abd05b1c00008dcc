// exp2_fma.glsl — 2^x on the FMA pipe, for softmax probabilities (x <= 128).
// The tensor cores and the special-function unit (MUFU, 16 results a clock an SM on
// the H100) are separate pipes; a tile's exponentials wait on MUFU while the tensor
// cores idle. Taking some of them as FMAs instead splits that wait between two pipes.
// 2^x = 2^n * 2^f with n = round(x) (added into the exponent bits) and f in
// [-0.5, 0.5]; 2^f by a cubic fitted for relative error (at most 1.0e-4, below half an
// fp16 ulp, 2.4e-4; exact at f = 0, so 2^0 = 1 and -inf, clamped to -127, gives 0).
#ifndef HELIOS_EXP2_FMA_GLSL
#define HELIOS_EXP2_FMA_GLSL
float exp2_fma(float x) {
    const float ROUND = 12582912.0;               // 1.5 * 2^23: round(x) lands in the low bits
    x = max(x, -127.0);
    precise const float t = x + ROUND;             // precise: no reassociation of the round trip
    precise const float f = x - (t - ROUND);
    const float q = ((0.05500869 * f + 0.24221063) * f + 0.6932829) * f + 1.0;
    // t's low bits hold n + 0x400000 (the 1.5 * 2^23 bias): shifted up 23 they add n to
    // q's exponent (the bias's bits fall off the top).
    return uintBitsToFloat(floatBitsToUint(q) + (floatBitsToUint(t) << 23));
}
// EXP2_P(i, x): element i of a fragment's probabilities. Timing models (scripts/gemm_model.sh):
// MODEL_POLY_ALL, MODEL_POLY_HALF, MODEL_POLY_QUARTER take all, every second or every
// fourth element's exponential on the FMA pipe, the rest on MUFU (i is a constant once
// the fragment loops are unrolled).
#if defined(MODEL_POLY_ALL)
#define EXP2_P(i, x) exp2_fma(x)
#elif defined(MODEL_POLY_HALF)
#define EXP2_P(i, x) (((i) & 1) != 0 ? exp2_fma(x) : exp2(x))
#elif defined(MODEL_POLY_QUARTER)
#define EXP2_P(i, x) (((i) & 3) == 3 ? exp2_fma(x) : exp2(x))
#else
#define EXP2_P(i, x) exp2(x)
#endif
#endif
