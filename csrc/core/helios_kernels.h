/* helios_kernels.h — the build's kernels as data, for whoever checks them against
 * the tables they were made from (tests/test_layouts.py reads each one's push block). */
#ifndef HELIOS_KERNELS_H
#define HELIOS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Permutation i's name, and its SPIR-V (NULL, 0 where the build's glslc lacked a
 * feature it needs); 0 for i past the last, else 1. */
int hl_kernel_spirv(uint32_t i, const char **name, const uint32_t **code, size_t *bytes);

#endif
