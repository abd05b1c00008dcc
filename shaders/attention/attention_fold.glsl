// attention_fold.glsl — per-row statistics folded into a score product, for the
// kernels built with FOLD=1 (the attention forward and both backward kernels).
//
// A statistic x of each row (the forward's running max, the backward's lse and
// delta) rides in the product as one more k-step: its pieces (3 values of the
// input type summing to x / FOLD_ONE) in the first columns (A side) or rows (B
// side) of one fragment, against a constant fragment of FOLD_ONE. The accumulator
// then holds S + x exactly enough (~2^-30 of x), so what follows is element-wise on
// fragments (GLSL's component-wise operators) and needs no element's (row, column),
// which KHR cooperative matrices leave to the driver.
//
// Include after `sm` (the kernel's shared uvec4 array), TK and bf16.glsl.
#ifndef HELIOS_ATTENTION_FOLD_GLSL
#define HELIOS_ATTENTION_FOLD_GLSL
// FOLD_ONE scales the pieces down so that fp16 holds large statistics.
const float FOLD_ONE = 256.0;
const uint FOLD_VECS = TK / 8;                 // one fragment row or column of TK elements, in vectors

// x cut to the input type's significand (11 bits for fp16, 8 for bf16): a value the
// 16-bit element holds exactly (in its normal range). By bits: cut by rounding through
// packHalf2x16 / unpackHalf2x16, the pieces behaved on the H100 (driver 580) as if the
// round trip gave x back, the lower pieces zero (tests/test_attention_backward.py,
// large scores, failed there; lavapipe failed the same way only with them zeroed).
float in_trunc(float x) {
#ifdef IN_BF16
    return uintBitsToFloat(floatBitsToUint(x) & 0xFFFF0000u);
#else
    return uintBitsToFloat(floatBitsToUint(x) & 0xFFFFE000u);
#endif
}

// x / FOLD_ONE as three input-type values hi + mid + lo (to ~2^-30 of x), packed as
// elements 0..2 of a TK-element row or column at sm[at] (the rest zero).
void put_pieces(uint at, float x) {
    const float y = x / FOLD_ONE, hi = in_trunc(y), mid = in_trunc(y - hi), lo = y - hi - mid;
    sm[at] = uvec4(pack_in2(hi, mid), pack_in2(lo, 0.0), 0u, 0u);
    [[unroll]] for (uint i = 1; i < FOLD_VECS; i++) sm[at + i] = uvec4(0u);
}
#endif
