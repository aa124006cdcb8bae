"""``xform.experimental.mesh_utils``: device grids for :class:`xform.sharding.Mesh`."""
import collections
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


def create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None, *,
                              process_is_granule=False, should_sort_granules_by_key=True,
                              allow_split_physical_axes=False):
    """A mesh of ``mesh_shape * dcn_mesh_shape``: one ``mesh_shape`` block per granule
    (a slice, or with ``process_is_granule`` a process), the blocks laid out as
    ``dcn_mesh_shape``, for parallelism over a fast inner and a slow outer network.

    CPU devices have no ``slice_index``: pass ``process_is_granule=True`` (as in JAX).

    Raises:
      ValueError: if the devices lack the granule attribute, the number of granules is
        not the product of ``dcn_mesh_shape``, or a granule's devices do not fill
        ``mesh_shape``.

    >>> import xform
    >>> from xform.experimental import mesh_utils
    >>> mesh_utils.create_hybrid_device_mesh((2,), (1,), xform.devices()[:2],
    ...                                      process_is_granule=True).shape
    (2,)
    """
    devices = list(devices) if devices is not None else backend.devices()
    attr = "process_index" if process_is_granule else "slice_index"
    if not hasattr(devices[0], attr):
        raise ValueError(f"Device {devices[0]} does not have attribute {attr}. See "
                         "`process_is_granule` option.")
    by_granule = collections.defaultdict(list)
    for dev in devices:
        by_granule[getattr(dev, attr)].append(dev)
    granules = ([by_granule[k] for k in sorted(by_granule)] if should_sort_granules_by_key
                else list(by_granule.values()))
    if np.prod(dcn_mesh_shape) != len(granules):
        raise ValueError(f"Number of slices {len(granules)} must equal the product of "
                         f"dcn_mesh_shape {dcn_mesh_shape}")
    meshes = [create_device_mesh(mesh_shape, granule,
                                 allow_split_physical_axes=allow_split_physical_axes)
              for granule in granules]
    layout = np.arange(len(granules)).reshape(dcn_mesh_shape)
    blocks = np.vectorize(lambda i: meshes[i], otypes=[object])(layout)
    return np.block(blocks.tolist())
