"""Kernel-development tools: variant sweeps, timing models applied to a copy of the tree,
the SASS reader for NVIDIA's pipeline cache, trace readers. Not part of the installed package."""
