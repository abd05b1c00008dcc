// activation.glsl — the activations every kernel applies, and their derivatives,
// in fp32. One place: the product epilogue (matmul_common.glsl) and the
// elementwise kernel (activation.comp) compute the same function. ACT is a
// specialization constant of the including kernel.
#ifndef HELIOS_ACTIVATION_GLSL
#define HELIOS_ACTIVATION_GLSL
const uint ACT_NONE = 0u, ACT_RELU = 1u, ACT_GELU_TANH = 2u, ACT_SILU = 3u;
const float GELU_K = 0.7978845608028654;  // sqrt(2/pi)
const float GELU_C = 0.044715;

// tanh through exp, exact at both infinities (no NaN for large |x|).
float tanh_safe(float x) { return 1.0 - 2.0 / (exp(2.0 * x) + 1.0); }

float activate(float x) {
    if (ACT == ACT_RELU) return max(x, 0.0);
    // GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    if (ACT == ACT_GELU_TANH) return 0.5 * x * (1.0 + tanh_safe(GELU_K * (x + GELU_C * x * x * x)));
    if (ACT == ACT_SILU) return x / (1.0 + exp(-x));
    return x;
}

// d activate / dx at x (torch's backward formulas: relu's is 0 at x = 0).
float activate_grad(float x) {
    if (ACT == ACT_RELU) return x > 0.0 ? 1.0 : 0.0;
    if (ACT == ACT_GELU_TANH) {
        const float t = tanh_safe(GELU_K * (x + GELU_C * x * x * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
    }
    if (ACT == ACT_SILU) {
        const float s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    return 1.0;
}
#endif
