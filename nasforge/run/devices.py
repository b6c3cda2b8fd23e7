"""Moved to ``nasforge.runtime.devices``.

This module re-exports its names for code and run records written against nasforge 0.2, and
warns: import them from the new module. It goes in the next release.
"""

import warnings

from nasforge.runtime.devices import (
    Placement,
    check_device,
    check_gpu_amount,
    check_gpus,
    cuda_visible_devices,
    gpu_slots,
    local_placement,
    placed,
    placement_text,
    resolve_device,
    set_placement,
    trial_device,
    trial_devices,
    trial_placement,
    visible_gpus,
)

__all__ = [
    "Placement",
    "visible_gpus",
    "check_device",
    "check_gpus",
    "check_gpu_amount",
    "gpu_slots",
    "cuda_visible_devices",
    "local_placement",
    "set_placement",
    "placed",
    "trial_placement",
    "trial_device",
    "trial_devices",
    "resolve_device",
    "placement_text",
]

warnings.warn(
    "nasforge.run.devices moved to nasforge.runtime.devices; import from there",
    DeprecationWarning,
    stacklevel=2,
)
