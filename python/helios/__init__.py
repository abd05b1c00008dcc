"""Helios: Vulkan cooperative-matrix matmul and attention, measured against CUDA.

Quick use::

    import numpy as np, helios
    c = helios.matmul(np.ones((64, 32), np.float16), np.ones((32, 16), np.float16))
    with helios.Device() as dev:
        print(dev.info["name"], dev.default_variant())
        t = dev.time_matmul(1024, 1024, 1024, iters=20)
        print(t.median_ms, t.tflops, t.variant)
"""
from ._helios import (
    DeviceClosedError,
    DeviceLostError,
    DeviceMemoryError,
    HeliosError,
    NoDeviceError,
    UnsupportedError,
    canonical_variant,
    device_count,
)
from .check import CheckResult, check_close, reference_matmul
from .attention import AttentionTiming, reference_attention
from .device import Device, MatmulTiming, attention, default_device, from_dlpack, matmul, variants
from .gemm import ACTIVATIONS, Chain, ChainTiming, Tensor

__version__ = "0.1.0"

__all__ = [
    "ACTIVATIONS",
    "AttentionTiming",
    "Chain",
    "ChainTiming",
    "CheckResult",
    "Device",
    "DeviceClosedError",
    "DeviceLostError",
    "DeviceMemoryError",
    "HeliosError",
    "MatmulTiming",
    "NoDeviceError",
    "Tensor",
    "UnsupportedError",
    "attention",
    "canonical_variant",
    "check_close",
    "default_device",
    "from_dlpack",
    "device_count",
    "matmul",
    "reference_attention",
    "reference_matmul",
    "variants",
]
