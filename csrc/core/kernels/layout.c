/* layout.c — where each cooperative-matrix shape keeps a TM x TN fp32 accumulator's
 * elements (coop_layout.comp), probed when the device opens, and whether that layout
 * has the shape the attention forward's rows-in-registers softmax relies on
 * (attention_coop.comp, ROWS): every lane's elements fall into `slots` rows, element
 * i in slot (i >> shift) & (slots - 1), and the lanes holding a row are lane ^ m for
 * the m within the bit mask `lanes`, each holding it in the same slot (so a row's max
 * and sum are a lane's own elements joined by shuffles over those bits). Khronos
 * leaves the layout to the driver; on the H100 16x16 and 16x8 fragments have it
 * (two rows a lane, four lanes a row), on lavapipe 8x8 (eight rows a lane, every
 * lane every row). A shape without it, or whose probe fails, keeps the softmax in
 * shared memory. The probe runs with fault injection suspended (fault.c): a fault
 * walk over an operation's calls (tests/test_faults.py) then meets that operation's
 * calls only, and a fault armed for the first buffer fires at the first product;
 * HELIOS_FAULT=probe:N fails the Nth shape's probe itself. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

static void record_probe(hl_device *dev, const void *ctx, VkDescriptorSet ds) {
    const hl_pipeline *p = ctx;
    vkCmdBindPipeline(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    vkCmdBindDescriptorSets(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dev->pipe_layout, 0, 1, &ds, 0, NULL);
    vkCmdDispatch(dev->cmd, 1, 1, 1);
    dev->tel.dispatches++;
}

/* Whether lanes a and b hold a common row (rows[l * n + i]: lane l's element i). */
static int share_a_row(const uint32_t *rows, uint32_t n, uint32_t a, uint32_t b) {
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < n; j++)
            if (rows[a * n + i] == rows[b * n + j]) return 1;
    return 0;
}

/* The layout's slots, shift and lanes from the probe's ids (ids[l * n + i] = row * tn +
 * column of lane l's element i), or 0 with the reason in L->why. */
static int describe(const float *loaded, const float *product, uint32_t lanes, uint32_t n, hl_rows_layout *L) {
    const uint32_t cells = L->tm * L->tn;
    if (!n || n * lanes != cells) {
        snprintf(L->why, sizeof L->why, "%u elements a lane in %u lanes for a %ux%u fragment", n, lanes, L->tm, L->tn);
        return 0;
    }
    uint32_t *rows = calloc(cells, sizeof *rows);
    unsigned char *seen = calloc(cells, 1);
    int ok = 0;
    if (!rows || !seen) {
        snprintf(L->why, sizeof L->why, "out of host memory");
        goto done;
    }
    for (uint32_t k = 0; k < cells; k++) { /* each cell exactly once, the MMA's layout the load's */
        const float id = loaded[k];
        if (!(id >= 0.0f) || id >= (float)cells || id != (float)(uint32_t)id || seen[(uint32_t)id]) {
            snprintf(L->why, sizeof L->why, "the loaded ids are not a permutation (lane %u element %u: %g)", k / n,
                     k % n, (double)id);
            goto done;
        }
        if (product[k] != -1.0f && product[k] != id) {
            snprintf(L->why, sizeof L->why, "an MMA's result lies otherwise than a load's (lane %u element %u)", k / n,
                     k % n);
            goto done;
        }
        seen[(uint32_t)id] = 1;
        rows[k] = (uint32_t)id / L->tn;
    }
    /* slots: the smallest power of two, and its shift, under which two elements of a
     * lane share a slot exactly when they share a row */
    for (uint32_t slots = 1; slots <= n && !ok; slots *= 2)
        for (uint32_t shift = 0; shift < 5 && !ok; shift++) {
            int fits = 1;
            for (uint32_t l = 0; l < lanes && fits; l++)
                for (uint32_t i = 0; i < n && fits; i++)
                    for (uint32_t j = 0; j < n && fits; j++)
                        fits = (((i >> shift) & (slots - 1)) == ((j >> shift) & (slots - 1))) ==
                               (rows[l * n + i] == rows[l * n + j]);
            if (fits) {
                L->slots = slots;
                L->shift = shift;
                ok = 1;
            }
        }
    if (!ok) {
        snprintf(L->why, sizeof L->why, "a lane's rows do not follow its element index by a shift and a mask");
        goto done;
    }
    L->lanes = 0; /* the lanes sharing lane 0's rows, as xor masks */
    for (uint32_t b = 1; b < lanes; b++)
        if (share_a_row(rows, n, 0, b)) L->lanes |= b;
    for (uint32_t a = 0; a < lanes && ok; a++)
        for (uint32_t b = 0; b < lanes && ok; b++) {
            const int same = ((a ^ b) & ~L->lanes) == 0;
            if (same != share_a_row(rows, n, a, b)) ok = 0;
            for (uint32_t s = 0; s < L->slots && ok && same; s++) /* slot s: element s << shift */
                ok = rows[a * n + (s << L->shift)] == rows[b * n + (s << L->shift)];
        }
    if (!ok) snprintf(L->why, sizeof L->why, "the lanes sharing a row are not lane ^ m for m within one mask");
done:
    free(rows);
    free(seen);
    return ok;
}

static hl_status probe_one(hl_device *dev, hl_rows_layout *L, hl_error *err) {
    hl_status st = HL_OK;
    const uint32_t lanes = dev->caps.subgroup_size, cells = L->tm * L->tn;
    const hl_variant v = {.path = HL_PATH_COOP, .tm = L->tm, .tn = L->tn, .tk = L->tk, .acc = HL_F32};
    const hl_spec_env e = {.subgroup = lanes};
    uint32_t spec[HL_SPEC_COOP_LAYOUT_COUNT];
    hl_spec_coop_layout(spec, &v, &e);
    /* Test-only (HELIOS_FAULT=probe:N): this shape's probe fails as a failed submission would. */
    const VkResult injected = hl_fault(HL_FAULT_PROBE);
    if (injected != VK_SUCCESS) return hl_vk_fail(err, injected, "the accumulator-layout probe", __FILE__, __LINE__);
    float *host = calloc(1 + 2 * (size_t)cells, sizeof *host);
    if (!host) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    hl_pipeline *pipe;
    HL_TRY(hl_pipeline_get(dev, hl_shader_coop_layout(), spec, HL_SPEC_COOP_LAYOUT_COUNT, lanes, &pipe, err));
    hl_operand out = {.scratch = &dev->buf_c,
                      .bytes = (1 + 2 * (uint64_t)cells) * sizeof *host,
                      .download = host,
                      .slot = HL_BIND_ROOF_OUT};
    hl_exec x = {.operands = &out, .n_operands = 1, .n_slots = HL_BIND_ROOF_COUNT, .record = record_probe, .ctx = pipe};
    HL_TRY(hl_exec_run(dev, &x, err));
    L->ok = describe(host + 1, host + 1 + cells, lanes, (uint32_t)host[0], L);
fail:
    free(host);
    return st;
}

void hl_rows_layouts_probe(hl_device *dev) {
    const hl_caps *c = &dev->caps;
    dev->n_rows_layouts = 0;
    if (!dev->coop_enabled) return;
    hl_fault_suspend(1);
    for (uint32_t i = 0; i < c->n_coop_shapes && dev->n_rows_layouts < HL_MAX_ROWS_LAYOUTS; i++) {
        const hl_coop_shape *s = &c->coop_shapes[i];
        if (hl_find_coop_shape(c, s->m, s->n, s->k, HL_F16, HL_F32) != s) continue; /* attention's shapes */
        hl_rows_layout *L = &dev->rows_layouts[dev->n_rows_layouts++];
        *L = (hl_rows_layout){.tm = s->m, .tn = s->n, .tk = s->k};
        hl_error err;
        if (probe_one(dev, L, &err) != HL_OK) { /* not fatal: that shape keeps its rows in shared memory */
            L->ok = 0;
            snprintf(L->why, sizeof L->why, "the probe failed: %.200s", err.message);
        }
    }
    hl_fault_suspend(0);
}

const hl_rows_layout *hl_device_rows_layout(const hl_device *dev, uint32_t i) {
    return i < dev->n_rows_layouts ? &dev->rows_layouts[i] : NULL;
}

const hl_rows_layout *hl_rows_layout_find(const hl_device *dev, uint32_t tm, uint32_t tn, uint32_t tk) {
    for (uint32_t i = 0; i < dev->n_rows_layouts; i++) {
        const hl_rows_layout *L = &dev->rows_layouts[i];
        if (L->tm == tm && L->tn == tn && L->tk == tk) return L;
    }
    return NULL;
}
