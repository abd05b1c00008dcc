// attention_softmax_rows.glsl — part of attention_coop.comp's key-tile loop (included
// inside main(), where its variables live): the ROWS=1 softmax of one key tile.
//
// ROWS=1 (where csrc/core/kernels/layout.c finds the accumulator's layout fit for it: the
// default at d <= 64 and causal at any d; HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS=1
// turns it off): the softmax stays in registers. Each lane keeps, per row slot of its
// elements (rr_slot), the row's running max and its part of the row's sum; a tile's
// scores are scaled and their row's max subtracted on the fragments; if every row has
// a max and no element passes it by more than RESCALE_SLACK (one vote), P = exp2 of
// them as they are; otherwise the rows' maxima are taken by each lane and joined by
// shuffles over ROWS_LANES, rows that moved are bumped and O rescaled element by
// element. P is stored 16-bit for P V as above; no fp32 scores go through memory and
// no lane reads a row. Masked tiles and the epilogue read each element's row and
// column from an ids tile (row * TN + column, loaded as an accumulator).

          if (live) {
            const bool masked_rr = j0 + BC > p.skv || (CAUSAL != 0 && j0 + BC - 1 > r0);
            // x = scale_log2 * S minus the row's running max (0 before it has one), masked
#ifndef P_IN_REGISTERS
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> su[BC / TN][WQ];
#endif
            // the lane's largest x, in four independent chains (a single chain of max over a
            // tile's 16-32 elements is what the vote below waits for)
            float tops[4] = float[4](-1.0 / 0.0, -1.0 / 0.0, -1.0 / 0.0, -1.0 / 0.0);
            [[unroll]] for (uint n = 0; n < BC / TN; n++) {
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s[WQ];
                SCORES(s, n)
                [[unroll]] for (uint w = 0; w < WQ; w++) {
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++) {
                        const float m = m_rr[w * ROWS_SLOTS + r], u = isinf(m) ? 0.0 : m;
                        [[unroll]] for (int i = 0; i < s[w].length(); i++)
                            if (rr_slot(uint(i)) == r) s[w][i] = s[w][i] * p.scale_log2 - u;
                    }
                    if (masked_rr) {   // the ids tile: each element's row * TN + column
                        coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> id;
                        coopMatLoad(id, sm, A_OFF, TN / 4, gl_CooperativeMatrixLayoutRowMajor);
                        MASK_BY_IDS(s[w], id, r0 + w * TM, j0 + n * TN, -1.0 / 0.0)
                    }
                    [[unroll]] for (int i = 0; i < s[w].length(); i++) tops[i & 3] = max(tops[i & 3], s[w][i]);
                    su[n][w] = s[w];
                }
            }
            // Every row has a max and no element passes it by more than the slack: P as it
            // is (the common case: no row maximum taken, no shuffle). Otherwise the rows'
            // maxima through ROWS_LANES's shuffles and the lazy rescale, as the row-wise path's.
            const float top = max(max(tops[0], tops[1]), max(tops[2], tops[3]));
            if (!subgroupAll(rr_have && top <= RESCALE_SLACK)) {
                bool moved = false;
                [[unroll]] for (uint w = 0; w < WQ; w++) {
                    float mx[ROWS_SLOTS];
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++) mx[r] = -1.0 / 0.0;
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++)
                        [[unroll]] for (uint n = 0; n < BC / TN; n++)
                            [[unroll]] for (int i = 0; i < su[n][w].length(); i++)
                                if (rr_slot(uint(i)) == r) mx[r] = max(mx[r], su[n][w][i]);
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++) {
                        [[unroll]] for (uint off = 1; off <= ROWS_LANES; off <<= 1)
                            if ((ROWS_LANES & off) != 0u) mx[r] = max(mx[r], subgroupShuffleXor(mx[r], off));
                        // relative to the old offset; a row without a max takes its first one
                        const uint k = w * ROWS_SLOTS + r;
                        const bool none = isinf(m_rr[k]);
                        const bool bump = none ? !isinf(mx[r]) : mx[r] > RESCALE_SLACK;
                        const float delta = bump ? mx[r] : 0.0;
                        m_rr[k] = bump ? (none ? mx[r] : m_rr[k] + mx[r]) : m_rr[k];
                        // A row's first max rescales nothing (its sum and O are still 0):
                        // exp2(-max) overflows to inf below a max of -128, and inf * 0 is NaN.
                        alpha_rr[k] = none ? 0.0 : exp2(-delta);
                        l_rr[k] *= alpha_rr[k];
                        moved = moved || bump;
                        mx[r] = delta;
                    }
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++)
                        [[unroll]] for (uint n = 0; n < BC / TN; n++)
                            [[unroll]] for (int i = 0; i < su[n][w].length(); i++)
                                if (rr_slot(uint(i)) == r) su[n][w][i] -= mx[r];
                }
                rr_have = true;
                [[unroll]] for (uint k = 0; k < WQ * ROWS_SLOTS; k++) rr_have = rr_have && !isinf(m_rr[k]);
                if (subgroupAny(moved)) [[unroll]] for (uint w = 0; w < WQ; w++)
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++)
                        [[unroll]] for (uint j = 0; j < D / TN; j++)
                            [[unroll]] for (int i = 0; i < o[w][j].length(); i++)
                                if (rr_slot(uint(i)) == r) o[w][j][i] *= alpha_rr[w * ROWS_SLOTS + r];
            }
            [[unroll]] for (uint n = 0; n < BC / TN; n++)
                [[unroll]] for (uint w = 0; w < WQ; w++) {
                    [[unroll]] for (int i = 0; i < su[n][w].length(); i++) {
                        float e = exp2(su[n][w][i]);
#ifdef IN_BF16
                        e = uintBitsToFloat((floatBitsToUint(e) + 0x8000u) & 0xFFFF0000u);
#endif
                        su[n][w][i] = e;
                    }
                    [[unroll]] for (uint r = 0; r < ROWS_SLOTS; r++)
                        [[unroll]] for (int i = 0; i < su[n][w].length(); i++)
                            if (rr_slot(uint(i)) == r) l_rr[w * ROWS_SLOTS + r] += su[n][w][i];
#ifndef P_IN_REGISTERS
                    coopMatStore(coopmat<IN_T, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(su[n][w]), sm,
                                 P_OFF + w * TM * PROW + n * (TN / 8), PROW, gl_CooperativeMatrixLayoutRowMajor);
#endif
                }
          }
#ifndef P_IN_REGISTERS
          sub_sync();                              // P stored before the subgroup loads it
#endif
