// attention_layout.glsl — where an attention operand's rows lie, shared by every
// attention kernel: packed (row stride 0): head after head, rows of D elements;
// rows (stride rs > 0): (batch, S, rs elements a row) with head h at columns
// [h*D, (h+1)*D) past the operand's offset — Q, K and V read straight out of a
// QKV product's (batch*S, 3*H*D) rows, O and dO in (batch*S, H*D), dQ, dK and dV
// written where Q, K and V lie. The strides are the spec constants QKV_RS and O_RS
// (shaders/families.py, ATTENTION_LAYOUT: every address then folds); heads per
// batch element (p.nh) and the offsets are push constants, declared before this.

// The element index of row 0 of head bh (batch * nh + head) of an operand with
// `rows` rows per head, row stride rs (0: packed) and offset off.
uint head_elem(uint bh, uint rows, uint rs, uint off) {
    return rs == 0u ? bh * rows * D + off : (bh / p.nh) * rows * rs + (bh % p.nh) * D + off;
}
uint pitch_elem(uint rs) { return rs == 0u ? D : rs; }
