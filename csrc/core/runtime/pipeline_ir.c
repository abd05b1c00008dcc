/* pipeline_ir.c — the driver's internal representations of each compiled
 * pipeline, written to files for whoever tunes the kernels.
 *
 * HELIOS_PIPELINE_IR=DIR: every pipeline this process compiles is created with
 * VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR and whatever the
 * driver returns through vkGetPipelineExecutableInternalRepresentationsKHR is
 * written to DIR/<kernel>-<spec hash>-e<executable>-r<index>-<name>.txt (.bin
 * for a binary representation). No profiler sees Vulkan dispatches on some
 * machines; what the compiler made of a loop is then the one direct view.
 * A driver may offer no representation at all: that is not an error, and the
 * device's note says so (dev.info["pipeline_ir"]), as it says why a file could
 * not be written. Nothing here fails an operation. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

const char *hl_pipeline_ir_dir(void) {
    const char *dir = getenv("HELIOS_PIPELINE_IR");
    return dir && *dir ? dir : NULL;
}

/* FNV-1a over the specialization constants and the subgroup size: one name per pipeline. */
static uint32_t spec_hash(const hl_pipeline *p) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i <= p->n_spec; i++) {
        uint32_t w = i < p->n_spec ? p->spec[i] : p->required_subgroup;
        for (int b = 0; b < 4; b++) {
            h ^= (w >> (8 * b)) & 0xffu;
            h *= 16777619u;
        }
    }
    return h;
}

/* Letters, digits, '-' and '_' of a driver-given name; anything else becomes '_'. */
static void file_safe(char *s) {
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            *s = '_';
    }
}

static void note(hl_device *dev, const char *fmt, ...) {
    if (dev->store.ir_note[0]) return; /* the first reason is the one worth reading */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dev->store.ir_note, sizeof dev->store.ir_note, fmt, ap);
    va_end(ap);
}

static int write_file(hl_device *dev, const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        note(dev, "cannot write %s (%s)", path, strerror(errno));
        return 0;
    }
    int ok = fwrite(data, 1, size, f) == size;
    ok = (fclose(f) == 0) && ok;
    if (!ok) note(dev, "cannot write %s (%s)", path, strerror(errno));
    return ok;
}

/* The driver's statistics of the pipeline (registers, shared memory, ...), one
 * `name=value` a line: DIR/<kernel>-<spec hash>-stats.txt. */
static void write_stats(hl_device *dev, const char *dir, const hl_pipeline *p) {
    char text[HL_MAX_STATS * 96], path[1400];
    size_t len = 0;
    if (!p->stats.n) return;
    for (uint32_t i = 0; i < p->stats.n && len < sizeof text; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s=%.17g\n", p->stats.items[i].name,
                                p->stats.items[i].value);
    if (len >= sizeof text) len = sizeof text - 1;
    snprintf(path, sizeof path, "%s/%s-%08x-stats.txt", dir, hl_spirv_table[p->shader].name, spec_hash(p));
    dev->store.ir_files += (uint32_t)write_file(dev, path, text, len);
}

void hl_pipeline_ir_dump(hl_device *dev, const hl_pipeline *p) {
    const char *dir = hl_pipeline_ir_dir();
    if (!dir) return;
    if (!dev->caps.has_pipeline_stats) {
        note(dev, "the driver lacks VK_KHR_pipeline_executable_properties");
        return;
    }
    PFN_vkGetPipelineExecutablePropertiesKHR get_props = (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(
        dev->device, "vkGetPipelineExecutablePropertiesKHR");
    PFN_vkGetPipelineExecutableInternalRepresentationsKHR get_ir =
        (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)vkGetDeviceProcAddr(
            dev->device, "vkGetPipelineExecutableInternalRepresentationsKHR");
    if (!get_props || !get_ir) {
        note(dev, "the driver does not expose the pipeline-executable queries");
        return;
    }
    mkdir(dir, 0755); /* one level; a failure shows when the first file is written */
    write_stats(dev, dir, p);
    VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = p->pipeline};
    uint32_t n_exec = 0;
    VkResult vr = get_props(dev->device, &pi, &n_exec, NULL);
    if (vr != VK_SUCCESS) {
        note(dev, "vkGetPipelineExecutablePropertiesKHR failed (%s)", hl_vk_result_name(vr));
        return;
    }
    const char *kernel = hl_spirv_table[p->shader].name;
    for (uint32_t e = 0; e < n_exec && e < 8u; e++) {
        VkPipelineExecutableInfoKHR ei = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = p->pipeline, .executableIndex = e};
        uint32_t n = 0;
        vr = get_ir(dev->device, &ei, &n, NULL);
        if (vr != VK_SUCCESS) {
            note(dev, "vkGetPipelineExecutableInternalRepresentationsKHR failed (%s)", hl_vk_result_name(vr));
            return;
        }
        if (n == 0) {
            note(dev, "the driver returned no internal representation for %s", hl_spirv_table[p->shader].name);
            continue;
        }
        if (n > 16u) n = 16u;
        VkPipelineExecutableInternalRepresentationKHR reps[16];
        for (uint32_t i = 0; i < n; i++)
            reps[i] = (VkPipelineExecutableInternalRepresentationKHR){
                .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR};
        vr = get_ir(dev->device, &ei, &n, reps); /* sizes first */
        if (vr != VK_SUCCESS && vr != VK_INCOMPLETE) {
            note(dev, "vkGetPipelineExecutableInternalRepresentationsKHR failed (%s)", hl_vk_result_name(vr));
            return;
        }
        void *bufs[16] = {0};
        int ok = 1;
        for (uint32_t i = 0; i < n; i++) {
            bufs[i] = malloc(reps[i].dataSize ? reps[i].dataSize : 1u);
            if (!bufs[i]) ok = 0;
            reps[i].pData = bufs[i];
        }
        if (ok) vr = get_ir(dev->device, &ei, &n, reps);
        if (!ok)
            note(dev, "out of host memory for an internal representation");
        else if (vr != VK_SUCCESS && vr != VK_INCOMPLETE)
            note(dev, "vkGetPipelineExecutableInternalRepresentationsKHR failed (%s)", hl_vk_result_name(vr));
        for (uint32_t i = 0; ok && (vr == VK_SUCCESS || vr == VK_INCOMPLETE) && i < n; i++) {
            char name[VK_MAX_DESCRIPTION_SIZE + 1], path[1400];
            snprintf(name, sizeof name, "%s", reps[i].name);
            file_safe(name);
            /* A text representation's dataSize counts its terminating NUL. */
            size_t size = reps[i].dataSize;
            if (reps[i].isText && size && ((const char *)reps[i].pData)[size - 1] == '\0') size--;
            snprintf(path, sizeof path, "%s/%s-%08x-e%u-r%u-%s.%s", dir, kernel, spec_hash(p), e, i, name,
                     reps[i].isText ? "txt" : "bin");
            dev->store.ir_files += (uint32_t)write_file(dev, path, reps[i].pData, size);
        }
        for (uint32_t i = 0; i < n; i++) free(bufs[i]);
    }
}

const char *hl_pipeline_ir_info(const hl_device *dev, uint32_t *files, const char **why) {
    *files = dev->store.ir_files;
    *why = dev->store.ir_note[0] ? dev->store.ir_note : NULL;
    return hl_pipeline_ir_dir();
}
