"""``xform.experimental.mesh_utils``: device grids for :class:`xform.sharding.Mesh`."""
import math

import numpy as np
from xform import backend


def create_device_mesh(mesh_shape, devices=None, *, contiguous_submeshes=False,
                       allow_split_physical_axes=False):
    """An array of ``mesh_shape`` holding all ``devices`` (default: ``xform.devices()``) in order.

    ``contiguous_submeshes`` and ``allow_split_physical_axes`` matter only for TPU
    topologies and are accepted for compatibility.

    Raises:
      ValueError: if ``mesh_shape`` is not a sequence of ints, or its product is not
        the number of devices.

    >>> import xform
    >>> from xform.experimental import mesh_utils
    >>> mesh_utils.create_device_mesh((2,), xform.devices()[:2]).shape
    (2,)
    """
    del contiguous_submeshes, allow_split_physical_axes
    devices = list(devices) if devices is not None else backend.devices()
    try:
        shape = tuple(int(s) for s in mesh_shape)
    except (TypeError, ValueError):
        raise ValueError(f"`mesh_shape` passed to `create_device_mesh` should be a sequence "
                         f"of ints. Got {mesh_shape}") from None
    if math.prod(shape) != len(devices):
        raise ValueError(f"Number of devices {len(devices)} must equal the product of "
                         f"mesh_shape {shape}")
    if devices and devices[-1].platform == "gpu":
        devices = sorted(devices, key=lambda d: d.id)
    out = np.empty(len(devices), dtype=object)
    out[:] = devices
    return out.reshape(shape)
