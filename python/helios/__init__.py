"""Helios: Vulkan cooperative-matrix matmul and attention, measured against CUDA.

Quick use::

    import numpy as np, helios
    c = helios.matmul(np.ones((64, 32), np.float16), np.ones((32, 16), np.float16))
    with helios.Device() as dev:
        print(dev.info["name"], dev.default_variant())
        t = dev.time_matmul(1024, 1024, 1024, iters=20)
        print(t.median_ms, t.tflops, t.variant)
"""

__version__ = "0.1.0"  # the one place: pyproject.toml reads it from here

from ._helios import (
    DeviceClosedError,
    DeviceLostError,
    DeviceMemoryError,
    HeliosError,
    NoDeviceError,
    UnsupportedError,
    canonical_variant,
    device_count,
    variant_fields,
)
from .attention import AttentionTiming, reference_attention
from .capture import Capture
from .check import CheckResult, assert_close, check_close, reference_matmul
from .device import Device
from .dtypes import bfloat16, float16, float32
from .functions import attention, default_device, matmul, tensor, variants
from .gemm import ACTIVATIONS, Chain, ChainTiming
from .interop import from_dlpack
from .matmul_timing import MatmulTiming
from .plan import Plan, PlanRun, PlanTiming, RunShape
from .tensor import Tensor

__all__ = [
    "ACTIVATIONS",
    "AttentionTiming",
    "Capture",
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
    "Plan",
    "PlanRun",
    "PlanTiming",
    "RunShape",
    "Tensor",
    "UnsupportedError",
    "attention",
    "assert_close",
    "bfloat16",
    "canonical_variant",
    "check_close",
    "default_device",
    "from_dlpack",
    "device_count",
    "float16",
    "float32",
    "matmul",
    "reference_attention",
    "reference_matmul",
    "variant_fields",
    "tensor",
    "variants",
]
