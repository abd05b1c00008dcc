/* pipeline_cache.c — a VkPipelineCache persisted per device and driver, so a
 * process does not recompile every kernel it used last time.
 *
 * File: $HELIOS_PIPELINE_CACHE (a directory; "0"/"off" disables), else
 * $XDG_CACHE_HOME/helios/pipelines, else $HOME/.cache/helios/pipelines; one
 * file per vendor, device, driver version and pipelineCacheUUID. The header is
 * checked before the driver sees the data (a corrupt or foreign file could
 * crash some drivers): a file that does not match is ignored, the reason is
 * kept for Python to warn with, and the file is rewritten when the device
 * closes (atomically: a temporary file renamed over it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define MAX_CACHE_BYTES (256u << 20)

static int cache_dir(char *out, size_t cap) {
    const char *env = getenv("HELIOS_PIPELINE_CACHE");
    if (env && *env) {
        if (!strcasecmp(env, "0") || !strcasecmp(env, "off") || !strcasecmp(env, "false") || !strcasecmp(env, "no"))
            return 0;
        return snprintf(out, cap, "%s", env) < (int)cap;
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) return snprintf(out, cap, "%s/helios/pipelines", xdg) < (int)cap;
    if (home && *home) return snprintf(out, cap, "%s/.cache/helios/pipelines", home) < (int)cap;
    return 0;
}

static void mkdirs(const char *path) { /* mkdir -p; failures show when the file is written */
    char buf[sizeof((hl_device *)0)->store.path];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(buf, 0755);
        *p = '/';
    }
    mkdir(buf, 0755);
}

/* The data if `path` holds a cache this device wrote, else NULL with the reason. */
static void *read_cache(const char *path, const VkPhysicalDeviceProperties *p, size_t *size, char *why,
                        size_t why_cap) {
    FILE *f = fopen(path, "rb");
    *size = 0;
    if (!f) {
        if (errno != ENOENT) snprintf(why, why_cap, "cannot read %s (%s)", path, strerror(errno));
        return NULL;
    }
    unsigned char *data = malloc(MAX_CACHE_BYTES + 1u);
    size_t n = data ? fread(data, 1, MAX_CACHE_BYTES + 1u, f) : 0;
    fclose(f);
    if (!data) return NULL;
    const char *bad = NULL;
    uint32_t hdr[4];
    if (n > MAX_CACHE_BYTES)
        bad = "larger than 256 MiB";
    else if (n < 16 + VK_UUID_SIZE)
        bad = "shorter than a pipeline cache header";
    if (!bad) {
        memcpy(hdr, data, sizeof hdr);
        if (hdr[0] < 16 + VK_UUID_SIZE || hdr[0] > n || hdr[1] != VK_PIPELINE_CACHE_HEADER_VERSION_ONE)
            bad = "not a Vulkan pipeline cache";
        else if (hdr[2] != p->vendorID || hdr[3] != p->deviceID ||
                 memcmp(data + 16, p->pipelineCacheUUID, VK_UUID_SIZE) != 0)
            bad = "written by another device or driver";
    }
    if (bad) {
        snprintf(why, why_cap, "%s: %s; ignored, rewritten when the device closes", path, bad);
        free(data);
        return NULL;
    }
    *size = n;
    return data;
}

hl_status hl_pipeline_cache_open(hl_device *dev, hl_error *err) {
    char dir[sizeof dev->store.path - 80];
    dev->store.path[0] = dev->store.note[0] = '\0';
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(dev->phys, &p);
    void *data = NULL;
    size_t size = 0;
    if (cache_dir(dir, sizeof dir)) {
        char uuid[2 * VK_UUID_SIZE + 1];
        for (unsigned i = 0; i < VK_UUID_SIZE; i++) snprintf(uuid + 2 * i, 3, "%02x", p.pipelineCacheUUID[i]);
        snprintf(dev->store.path, sizeof dev->store.path, "%s/%04x-%04x-%08x-%s.bin", dir, p.vendorID, p.deviceID,
                 p.driverVersion, uuid);
        data = read_cache(dev->store.path, &p, &size, dev->store.note, sizeof dev->store.note);
    }
    VkPipelineCacheCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, .initialDataSize = size, .pInitialData = data};
    VkResult r = vkCreatePipelineCache(dev->device, &ci, NULL, &dev->store.cache);
    if (r != VK_SUCCESS && data) { /* the driver refused the data after all: start empty */
        snprintf(dev->store.note, sizeof dev->store.note, "%s: refused by the driver; ignored", dev->store.path);
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = vkCreatePipelineCache(dev->device, &ci, NULL, &dev->store.cache);
    }
    free(data);
    dev->store.loaded_bytes = data ? size : 0;
    if (r != VK_SUCCESS) {
        dev->store.cache = VK_NULL_HANDLE;
        return hl_vk_fail(err, r, "vkCreatePipelineCache", __FILE__, __LINE__);
    }
    return HL_OK;
}

void hl_pipeline_cache_close(hl_device *dev) {
    if (!dev->store.cache) return;
    size_t size = 0;
    void *data = NULL;
    /* Written only when this process compiled something new: a read-only user
     * (or a second process) does not rewrite the same file. */
    if (dev->store.path[0] && dev->compiles_total &&
        vkGetPipelineCacheData(dev->device, dev->store.cache, &size, NULL) == VK_SUCCESS && size &&
        size <= MAX_CACHE_BYTES && (data = malloc(size)) &&
        vkGetPipelineCacheData(dev->device, dev->store.cache, &size, data) == VK_SUCCESS) {
        char dir[sizeof dev->store.path], tmp[sizeof dev->store.path + 32];
        snprintf(dir, sizeof dir, "%s", dev->store.path);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = '\0';
            mkdirs(dir);
        }
        snprintf(tmp, sizeof tmp, "%s.tmp-%ld", dev->store.path, (long)getpid());
        FILE *f = fopen(tmp, "wb");
        if (f) {
            int ok = fwrite(data, 1, size, f) == size;
            ok = (fclose(f) == 0) && ok;
            if (!ok || rename(tmp, dev->store.path) != 0) remove(tmp);
        }
    }
    free(data);
    vkDestroyPipelineCache(dev->device, dev->store.cache, NULL);
    dev->store.cache = VK_NULL_HANDLE;
}

const char *hl_pipeline_cache_info(const hl_device *dev, uint64_t *loaded_bytes, const char **note) {
    *loaded_bytes = dev->store.loaded_bytes;
    *note = dev->store.note[0] ? dev->store.note : NULL;
    return dev->store.path[0] ? dev->store.path : NULL;
}
