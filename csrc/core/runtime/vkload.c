/* vkload.c — finds the Vulkan loader at run time (dlopen), once per process.
 * HELIOS_VULKAN_LOADER names another library file (tests use a missing one). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#define HL_VK_DEFINE(name) PFN_##name name;
HL_VK_FUNCS(HL_VK_DEFINE)
#undef HL_VK_DEFINE

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512];

static void load(void) {
    const char *path = getenv("HELIOS_VULKAN_LOADER");
    if (!path || !*path) path = "libvulkan.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error,
                 "the Vulkan loader could not be loaded (%s): install it (Debian/Ubuntu: apt install "
                 "libvulkan1; Fedora/RHEL: dnf install vulkan-loader) and a Vulkan driver for the GPU "
                 "(NVIDIA: the driver's Vulkan ICD; CPU: mesa-vulkan-drivers)",
                 why ? why : path);
        return;
    }
    /* The handle stays open for the life of the process: the pointers live in it. */
#define HL_VK_RESOLVE(name)                                                                                            \
    if (!(name = (PFN_##name)dlsym(lib, #name))) {                                                                     \
        snprintf(load_error, sizeof load_error,                                                                        \
                 "the Vulkan loader %s has no %s: it is too "                                                          \
                 "old for Vulkan 1.3 (install a newer libvulkan1)",                                                    \
                 path, #name);                                                                                         \
        return;                                                                                                        \
    }
    HL_VK_FUNCS(HL_VK_RESOLVE)
#undef HL_VK_RESOLVE
}

hl_status hl_vk_load(hl_error *err) {
    pthread_once(&once, load);
    if (load_error[0]) return hl_fail(err, HL_ERR_NO_DEVICE, "%s", load_error);
    return HL_OK;
}
