// attention_ids.glsl — the ids tile: where a lane's accumulator elements lie. KHR leaves the
// accumulator's element layout to the driver; a TM x TN fp32 tile in shared memory whose
// element (r, c) holds r * TN + c, loaded as an accumulator, tells each lane the row and
// column of its element i. The forward's rows path and the backward's dQ kernel (P and dS
// in registers) mask their fragments with it.
#ifndef HELIOS_ATTENTION_IDS_GLSL
#define HELIOS_ATTENTION_IDS_GLSL
// The tile's 16-byte vector idx (elements 4 idx .. 4 idx + 3).
#define IDS_VEC(idx) floatBitsToUint(vec4((idx) * 4, (idx) * 4 + 1, (idx) * 4 + 2, (idx) * 4 + 3))
// Fragment f's elements outside the mask (a key past S_kv, or causal: a key past its query)
// set to v; id is the ids tile loaded as an accumulator, f's first row and column are row0
// and col0 (query and key indices in the head).
#define MASK_BY_IDS(f, id, row0, col0, v)                                                    \
    [[unroll]] for (int i = 0; i < f.length(); i++) {                                        \
        const uint e = uint(id[i]), row = (row0) + e / TN, col = (col0) + e % TN;            \
        if (col >= p.skv || (CAUSAL != 0 && col > row)) f[i] = v;                            \
    }
#endif
