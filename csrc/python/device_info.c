/* device_info.c — Device.info: the capability report (identity, limits,
 * cooperative-matrix shapes, accumulator layouts, kernel statistics of the
 * default variant), built on first read and kept on the Device. */
#include "binding.h"

static const char *component_name(int raw) {
    switch (raw) {
        case 0:
            return "f16";
        case 1:
            return "f32";
        case 2:
            return "f64";
        case 3:
            return "s8";
        case 4:
            return "s16";
        case 5:
            return "s32";
        case 6:
            return "s64";
        case 7:
            return "u8";
        case 8:
            return "u16";
        case 9:
            return "u32";
        case 10:
            return "u64";
        case 1000141000:
            return "bf16";
        case 1000491000:
            return "e4m3";
        case 1000491001:
            return "e5m2";
        default:
            return "other";
    }
}

static const char *scope_name(int raw) {
    switch (raw) {
        case 1:
            return "device";
        case 2:
            return "workgroup";
        case 3:
            return "subgroup";
        case 5:
            return "queue_family";
        default:
            return "other";
    }
}

/* 16 bytes as the canonical 8-4-4-4-12 lower-case form (CUDA's and NVML's
 * UUIDs are the same bytes for NVIDIA devices; NVML prefixes "GPU-"). */
static void uuid_str(const uint8_t *u, char *out) {
    int o = 0;
    for (int i = 0; i < 16; i++) {
        o += sprintf(out + o, "%02x", u[i]);
        if (i == 3 || i == 5 || i == 7 || i == 9) out[o++] = '-';
    }
    out[o] = 0;
}

/* uuid, driver_uuid, luid (None unless the driver marks it valid) and
 * pci_bus_id (domain:bus:device.function as NVML prints it; None without
 * VK_EXT_pci_bus_info). */
static int identity(const hl_caps *c, PyObject *d) {
    char uuid[40], duuid[40], luid[20], pci[32];
    uuid_str(c->uuid, uuid);
    uuid_str(c->driver_uuid, duuid);
    for (int i = 0; i < 8; i++) sprintf(luid + 2 * i, "%02x", c->luid[i]);
    snprintf(pci, sizeof pci, "%08x:%02x:%02x.%x", c->pci_domain, c->pci_bus, c->pci_device, c->pci_function);
    PyObject *e =
        Py_BuildValue("{s:s,s:s,s:s,s:s}", "uuid", uuid, "driver_uuid", duuid, "luid", luid, "pci_bus_id", pci);
    if (!e) return -1;
    if (!c->luid_valid && PyDict_SetItemString(e, "luid", Py_None) < 0) {
        Py_DECREF(e);
        return -1;
    }
    if (!c->has_pci && PyDict_SetItemString(e, "pci_bus_id", Py_None) < 0) {
        Py_DECREF(e);
        return -1;
    }
    int r = PyDict_Update(d, e);
    Py_DECREF(e);
    return r;
}

/* Long: the capability report, one dict entry a capability, in the order it prints. */
static PyObject *build_info(DeviceObject *self) {
    const hl_caps *c = hl_device_caps(self->dev);
    PyObject *table = PyList_New(0);
    if (!table) return NULL;
    for (uint32_t i = 0; i < c->n_coop_shapes; i++) {
        const hl_coop_shape *s = &c->coop_shapes[i];
        PyObject *row = Py_BuildValue("{s:I,s:I,s:I,s:s,s:s,s:s,s:s,s:O,s:s}", "m", s->m, "n", s->n, "k", s->k, "a",
                                      component_name(s->a_raw), "b", component_name(s->b_raw), "c",
                                      component_name(s->c_raw), "result", component_name(s->result_raw), "saturating",
                                      s->saturating ? Py_True : Py_False, "scope", scope_name(s->scope));
        if (!row || PyList_Append(table, row) < 0) {
            Py_XDECREF(row);
            Py_DECREF(table);
            return NULL;
        }
        Py_DECREF(row);
    }
    static const char *types[] = {"other", "integrated_gpu", "discrete_gpu", "virtual_gpu", "cpu"};
    char api[32];
    snprintf(api, sizeof api, "%u.%u.%u", c->api_version >> 22, (c->api_version >> 12) & 0x3ff, c->api_version & 0xfff);
    PyObject *d = Py_BuildValue(
        "{s:s,s:s,s:I,s:I,s:s,s:s,s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:K,s:K,s:K,s:d,s:I,"
        "s:O,s:O,s:O,s:O,s:O,s:I,s:N}",
        "name", c->name, "device_type", types[c->device_type >= 0 && c->device_type <= 4 ? c->device_type : 0],
        "vendor_id", c->vendor_id, "device_id", c->device_id, "driver_name", c->driver_name, "driver_info",
        c->driver_info, "driver_version", c->driver_version, "api_version", api, "subgroup_size", c->subgroup_size,
        "min_subgroup_size", c->min_subgroup_size, "max_subgroup_size", c->max_subgroup_size, "shared_memory_bytes",
        c->shared_memory_bytes, "max_workgroup_invocations", c->max_workgroup_invocations, "max_storage_buffer_range",
        (unsigned long long)c->max_storage_buffer_range, "max_allocation_bytes",
        (unsigned long long)c->max_allocation_bytes, "device_local_bytes",
        (unsigned long long)c->device_local_heap_bytes, "timestamp_period_ns", (double)c->timestamp_period_ns,
        "timestamp_valid_bits", c->timestamp_valid_bits, "cooperative_matrix", c->has_coop ? Py_True : Py_False,
        "cooperative_matrix_enabled", hl_device_coop_enabled(self->dev) ? Py_True : Py_False, "cooperative_matrix2",
        c->has_coop2 ? Py_True : Py_False, "bf16", c->has_bf16 ? Py_True : Py_False, "fp16",
        c->has_fp16 ? Py_True : Py_False, "cooperative_matrix2_flexible_dimensions", c->n_coop2_flex,
        "cooperative_matrix_properties", table);
    if (!d) return NULL;
    /* sm_count: 0 where the driver does not say (VK_NV_shader_sm_builtins). */
    PyObject *extra = Py_BuildValue(
        "{s:{s:O,s:O,s:O,s:O,s:I},s:I,s:O,s:O,s:O,s:O,s:O}", "cooperative_matrix2_features", "workgroup_scope",
        c->coop2_workgroup_scope ? Py_True : Py_False, "flexible_dimensions",
        c->coop2_flexible_dimensions ? Py_True : Py_False, "tensor_addressing",
        c->coop2_tensor_addressing ? Py_True : Py_False, "conversions", c->coop2_conversions ? Py_True : Py_False,
        "workgroup_scope_max_invocations", c->coop2_workgroup_scope_max_invocations, "sm_count", c->sm_count,
        "pipeline_statistics", c->has_pipeline_stats ? Py_True : Py_False, "cooperative_matrix2_usable",
        c->coop2_usable ? Py_True : Py_False, "cooperative_matrix2_enabled",
        hl_device_coop2_enabled(self->dev) ? Py_True : Py_False, "external_memory_fd",
        c->external_memory_fd ? Py_True : Py_False, "external_semaphore_fd",
        c->external_semaphore_fd ? Py_True : Py_False);
    /* bfloat16: where its cooperative kernels run, and why not where they do not. */
    const char *bf16_why = hl_bf16_coop_unavailable(self->dev);
    /* The queue's priority among the GPU's contexts: asked (HELIOS_QUEUE_PRIORITY) and got. */
    PyObject *priority =
        Py_BuildValue("{s:O,s:s,s:s,s:O,s:I,s:O}", "global_priority", c->global_priority_ext ? Py_True : Py_False,
                      "queue_priority_asked", hl_queue_priority_name(c->queue_priority_asked), "queue_priority",
                      hl_queue_priority_name(c->queue_priority), "queue_priority_refused",
                      c->queue_priority_refused ? Py_True : Py_False, "queue_family", c->queue_family,
                      "queue_family_graphics", c->queue_family_graphics ? Py_True : Py_False);
    if (!priority || (extra && PyDict_Update(extra, priority) < 0)) Py_CLEAR(extra);
    Py_XDECREF(priority);
    PyObject *spin = extra ? PyLong_FromUnsignedLong(hl_device_wait_spin_us(self->dev)) : NULL;
    if (extra && (!spin || PyDict_SetItemString(extra, "wait_spin_us", spin) < 0)) Py_CLEAR(extra);
    Py_XDECREF(spin);
    if (extra && (PyDict_SetItemString(extra, "timeline_semaphore", c->has_timeline ? Py_True : Py_False) < 0 ||
                  PyDict_SetItemString(extra, "bf16_cooperative_matrix", c->bf16_coop ? Py_True : Py_False) < 0 ||
                  PyDict_SetItemString(extra, "bf16_coop_enabled", bf16_why ? Py_False : Py_True) < 0)) {
        Py_CLEAR(extra);
    }
    if (extra) {
        PyObject *why = bf16_why ? PyUnicode_FromString(bf16_why) : Py_NewRef(Py_None);
        if (!why || PyDict_SetItemString(extra, "bf16_coop_unavailable", why) < 0) Py_CLEAR(extra);
        Py_XDECREF(why);
    }
    if (!extra || PyDict_Update(d, extra) < 0) {
        Py_XDECREF(extra);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(extra);
    if (identity(c, d) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    uint64_t loaded;
    const char *note, *path = hl_pipeline_cache_info(self->dev, &loaded, &note);
    PyObject *align = PyLong_FromUnsignedLongLong(c->storage_offset_alignment);
    if (!align || PyDict_SetItemString(d, "storage_offset_alignment", align) < 0) {
        Py_XDECREF(align);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(align);
    PyObject *pc =
        Py_BuildValue("{s:z,s:K,s:z}", "path", path, "loaded_bytes", (unsigned long long)loaded, "note", note);
    if (!pc || PyDict_SetItemString(d, "pipeline_cache", pc) < 0) {
        Py_XDECREF(pc);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(pc);
    uint32_t ir_files;
    const char *ir_note, *ir_dir = hl_pipeline_ir_info(self->dev, &ir_files, &ir_note);
    PyObject *ir = Py_BuildValue("{s:z,s:I,s:z}", "dir", ir_dir, "files", (unsigned)ir_files, "note", ir_note);
    if (!ir || PyDict_SetItemString(d, "pipeline_ir", ir) < 0) {
        Py_XDECREF(ir);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(ir);
    /* Each f16 -> f32 shape's accumulator layout (probed at open) and whether the attention
     * forward can keep its softmax rows in registers on it. */
    PyObject *layouts = PyList_New(0);
    const hl_rows_layout *L;
    for (uint32_t i = 0; layouts && (L = hl_device_rows_layout(self->dev, i)) != NULL; i++) {
        char shape[48];
        snprintf(shape, sizeof shape, "%ux%ux%u", L->tm, L->tn, L->tk);
        PyObject *row =
            L->ok ? Py_BuildValue("{s:s,s:O,s:I,s:I,s:I,s:O}", "shape", shape, "rows_in_registers", Py_True, "slots",
                                  L->slots, "shift", L->shift, "lanes", L->lanes, "why", Py_None)
                  : Py_BuildValue("{s:s,s:O,s:s}", "shape", shape, "rows_in_registers", Py_False, "why", L->why);
        if (!row || PyList_Append(layouts, row) < 0) Py_CLEAR(layouts);
        Py_XDECREF(row);
    }
    if (!layouts || PyDict_SetItemString(d, "accumulator_layouts", layouts) < 0) {
        Py_XDECREF(layouts);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(layouts);
    return d;
}

PyObject *Device_info(DeviceObject *self, void *c) {
    if (!self->dev) {
        PyErr_SetString(state_from_type(Py_TYPE(self))->DeviceClosedError, "the Device is closed");
        return NULL;
    }
    if (!self->info) self->info = build_info(self);
    if (!self->info) return NULL;
    return PyDictProxy_New(self->info);
}
