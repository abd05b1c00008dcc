// attention_softmax_tiles.glsl — part of attention_coop.comp's key-tile loop (included
// inside main(), where its variables live): the softmax of one key tile through the
// subgroup's shared scratch (ROWS=0), with the FOLD=1 fast path first.
//
// FOLD=1 (the default; HELIOS_DISABLE_ATTENTION_FOLD=1 turns it off): each row's
// running max rides in the score product (attention_fold.glsl: an A fragment per
// row tile, rebuilt when a max moves), so a tile's P = exp2(scale_log2 * S') is
// element-wise on the accumulators and stored 16-bit straight away; no fp32 scores
// go through the scratch and no lane reads them by row. That fast path is taken
// by a subgroup for a tile without masked elements once every row has a max, and
// kept when no element of the tile exceeds its row's max by more than
// RESCALE_SLACK (the same bound the lazy rescale keeps); otherwise (the first tile,
// the causal diagonal, the key tail, a max that moved) the tile runs the row-wise
// softmax through the scratch as before. Either way the row sums are taken by the
// tensor cores beside the P V product (P, as stored in 16 bits, times a constant
// fragment), kept in an accumulator rescaled with O.

        // FOLD=1, the fast path: P = exp2(scale_log2 * (S - max)) on the fragments,
        // stored 16-bit; kept if no element exceeds 2^RESCALE_SLACK (uniform per
        // subgroup, as is every condition here: the syncs below are taken by all).
        const bool masked_here = j0 + BC > p.skv || (CAUSAL != 0 && j0 + BC - 1 > r0);
        const bool try_fast = FOLD != 0 && live && !masked_here && subgroupAll(exact);
        float top = -1.0 / 0.0;
        if (try_fast)
        [[unroll]] for (uint n = 0; n < BC / TN; n++) {
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
            SCORES(s, n)
            [[unroll]] for (uint w = 0; w < WQ; w++) {
                for (int i = 0; i < s[w].length(); i++) {
                    const float x = s[w][i] * p.scale_log2;
                    top = max(top, x);
#ifdef IN_BF16
                    // to nearest (ties away), as pack_p: the conversion below is then exact
                    s[w][i] = uintBitsToFloat((floatBitsToUint(exp2(x)) + 0x8000u) & 0xFFFF0000u);
#else
                    s[w][i] = exp2(x);
#endif
                }
                coopMatStore(coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(s[w]), sm,
                             P_OFF + w * TM * PROW + n * (TN / 8), PROW, gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        const bool fast = try_fast && subgroupAll(top <= RESCALE_SLACK);
        const bool slow = live && !fast;
        if (FOLD != 0) sub_sync();                 // a failed try's P stores before the scores overwrite them

        // S = Q K^T, one TN-column slab at a time, into the subgroup's scratch.
        if (slow) [[unroll]] for (uint n = 0; n < BC / TN; n++) {
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
            SCORES(s, n)
            [[unroll]] for (uint w = 0; w < WQ; w++)
                coopMatStore(s[w], sm, SUB + w * TM * SROW + n * (TN / 4), SROW,
                             gl_CooperativeMatrixLayoutRowMajor);
        }
        sub_sync();

        // Online softmax over this tile's columns, row by row.
        float pv[PASSES][CPL];
        float alpha[PASSES];
        bool rescale = false;
        if (slow) [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
            const uint r = ps * RPP + lane / LPR;
            const uint grow = r0 + r;
            float mx = -1.0 / 0.0;
            [[unroll]] for (uint c = 0; c < CPL; c++) {
                const uint col = part * CPL + c, gcol = j0 + col;
                float x = s_at(SUB, r, col) * p.scale_log2;
                if (FOLD != 0) x += m_fold[ps];
                bool masked = gcol >= p.skv || (CAUSAL != 0 && gcol > grow);
                x = masked ? -1.0 / 0.0 : x;
                pv[ps][c] = x;
                mx = max(mx, x);
            }
            [[unroll]] for (uint off = 1; off < LPR; off *= 2) mx = max(mx, subgroupShuffleXor(mx, off));
            // Lazy rescaling: the running max moves only when the tile's exceeds it
            // by more than RESCALE_SLACK (log2 units); otherwise p stays below
            // 2^RESCALE_SLACK (exact enough in fp16, P's relative precision is the
            // same at any magnitude) and O needs no rescale for this row.
            const bool bump = mx > m_run[ps] + RESCALE_SLACK;
            const float m_new = bump ? mx : m_run[ps];
            const float m_use = isinf(m_new) ? 0.0 : m_new;   // a row with no key yet
            alpha[ps] = bump ? exp2(m_run[ps] - m_use) : 1.0;
            rescale = rescale || bump;
            float sum = 0.0;
            [[unroll]] for (uint c = 0; c < CPL; c++) {
                pv[ps][c] = exp2(pv[ps][c] - m_use);
                sum += pv[ps][c];
            }
            if (FOLD == 0) {   // FOLD=1: lsum, beside P V
                [[unroll]] for (uint off = 1; off < LPR; off *= 2) sum += subgroupShuffleXor(sum, off);
                l_run[ps] = l_run[ps] * alpha[ps] + sum;
            }
            m_run[ps] = m_new;
        }
        // Whether any row of the subgroup moved its max (uniform: the rescale below
        // is a cooperative operation).
        any_rescale = subgroupAny(rescale);
        sub_sync();                                // every S read before P overwrites it
        if (slow) [[unroll]] for (uint ps = 0; ps < PASSES; ps++) {
            const uint r = ps * RPP + lane / LPR;
            [[unroll]] for (uint c8 = 0; c8 < CPL / 8; c8++) {
                uvec4 v;
                [[unroll]] for (uint h = 0; h < 4; h++)
                    v[h] = pack_p(pv[ps][c8 * 8 + 2 * h], pv[ps][c8 * 8 + 2 * h + 1]);
                sm[P_OFF + r * PROW + (part * CPL) / 8 + c8] = v;
            }
            if (any_rescale)
                for (uint vi = part; vi < AROW; vi += LPR) sm[A_OFF + r * AROW + vi] = floatBitsToUint(vec4(alpha[ps]));
            if (FOLD != 0 && any_rescale) {
                // the rows' new max into their pieces (mf reloaded below)
                m_fold[ps] = isinf(m_run[ps]) || isnan(m_run[ps]) ? 0.0 : m_run[ps];
                if (part == 0) put_pieces(PIECE_OFF + r * FOLD_VECS, -m_fold[ps] / p.scale_log2);
            }
        }
        if (FOLD != 0 && any_rescale) {
            exact = true;
            [[unroll]] for (uint ps = 0; ps < PASSES; ps++) exact = exact && m_fold[ps] == m_run[ps];
        }
        sub_sync();
