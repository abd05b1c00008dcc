#version 460
// optim.comp — AdamW over n fp32 parameters, as torch.optim.AdamW updates them (one
// element an invocation), the step count t and the learning rate read from the plan's
// parameter words, so that a training step's plan replays with new values and no new
// recording:
//   p *= 1 - lr wd;  m += (1 - b1) (g - m);  v = b2 v + (1 - b2) g^2;
//   p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// With p.copy, P16 = p rounded to 16 bits (nearest even; IN_BF16: bfloat16), the copy
// the products read. With max_norm > 0 the gradient is first clipped as torch's
// clip_grad_norm_ does, from the squared norm of all gradients in a word; with guard,
// a non-finite squared norm leaves p, m, v and the copy as they were. fp32 arithmetic.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#include "spec_optim.glsl"
#include "../common/bf16.glsl"

layout(local_size_x = 256) in;

#include "push_optim.glsl"  // the push words (shaders/layouts.py)

layout(binding = BINDING_PARAMS) readonly buffer Words { uint words[]; };
layout(binding = BINDING_P) buffer P { float p32[]; };
layout(binding = BINDING_M) buffer M { float m32[]; };
layout(binding = BINDING_V) buffer V { float v32[]; };
layout(binding = BINDING_G) readonly buffer G { float g32[]; };
layout(binding = BINDING_P16) writeonly buffer P16 { uint16_t p16[]; };

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    const float t = float(words[p.step_slot]), lr = uintBitsToFloat(words[p.lr_slot]);
    float g = g32[i];
    if (p.max_norm > 0.0 || p.guard != 0u) {  // the squared norm of every gradient, in a word
        const float total = uintBitsToFloat(words[p.clip_slot]);
        if (p.guard != 0u && (isnan(total) || isinf(total))) return;  // a non-finite step changes nothing
        if (p.max_norm > 0.0) g *= min(1.0, p.max_norm / (sqrt(total) + 1e-6));  // torch's clip_grad_norm_
    }
    float w = p32[i] * (1.0 - lr * p.weight_decay);
    const float m = m32[i] + (1.0 - p.beta1) * (g - m32[i]);
    const float v = p.beta2 * v32[i] + (1.0 - p.beta2) * g * g;
    const float denom = sqrt(v) / sqrt(1.0 - pow(p.beta2, t)) + p.eps;
    w -= lr / (1.0 - pow(p.beta1, t)) * m / denom;
    p32[i] = w;
    m32[i] = m;
    v32[i] = v;
    if (p.copy != 0u) {
#ifdef IN_BF16
        p16[i] = uint16_t(f32_to_bf16(w));
#else
        p16[i] = float16BitsToUint16(float16_t(w));
#endif
    }
}
