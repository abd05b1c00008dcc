/* pipeline_store.h — the device's pipeline store (struct hl_device's `store`), owned by
 * csrc/core/runtime/. */
#ifndef HELIOS_PIPELINE_STORE_H
#define HELIOS_PIPELINE_STORE_H

#include <stdint.h>

#include <vulkan/vulkan.h>

/* Where compiled pipelines are kept and shown (csrc/core/runtime/pipeline_cache.c and
 * pipeline_ir.c). */
typedef struct hl_pipeline_store {
    VkPipelineCache cache; /* persisted per device and driver (pipeline_cache.c) */
    char path[1024];       /* its file; empty: not persisted */
    char note[1200];       /* why a file was ignored; empty: nothing to say */
    uint64_t loaded_bytes;
    char ir_note[512]; /* HELIOS_PIPELINE_IR: why a representation was not written (pipeline_ir.c) */
    uint32_t ir_files; /* HELIOS_PIPELINE_IR: files written since open */
} hl_pipeline_store;

#endif
