// shared_check.glsl — a coop kernel checks the C side's count of its shared memory.
// The count (SHARED_BYTES, a specialization constant: shaders/families.py SHARED_COUNTED) is
// what refuses a variant past the device's limit; each kernel defines SHARED_DECLARED (the
// bytes it declares) before including this, and writes NaN outputs where it declares more
// than was counted, so every correctness test of every variant also checks the count.
// SHARED_OVER is a uint, not a bool: spirv-opt mis-folds && of two specialization-constant
// bools (matmul_coop.comp's VEC_EPILOGUE).
#ifndef HELIOS_SHARED_CHECK_GLSL
#define HELIOS_SHARED_CHECK_GLSL
const uint SHARED_OVER = SHARED_DECLARED > SHARED_BYTES ? 1u : 0u;
// A quiet NaN: what a kernel's outputs become when the count is short.
#define MISCOUNT_NAN uintBitsToFloat(0x7FC00000u)
// v, or NaN where the count is short.
#define UNLESS_MISCOUNTED(v) (SHARED_OVER != 0u ? MISCOUNT_NAN : (v))
#endif
