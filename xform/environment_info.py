"""``print_environment_info``: the versions, devices and ``JAX_``/``XLA_`` settings to
paste into a bug report, as ``jax.print_environment_info``."""
import importlib.metadata
import os
import platform
import subprocess
import sys
import textwrap

import numpy as np

from xform import distributed
from xform.transforms import devices
from xform.version import __version__


def _nvidia_smi():
    try:
        return subprocess.check_output(["nvidia-smi"], stderr=subprocess.DEVNULL).decode()
    except Exception:  # noqa: BLE001  (no driver, no binary: nothing to add)
        return None


def print_environment_info(return_string=False):
    """Print (or with ``return_string=True`` return) this installation's description.

    >>> "numpy:" in xform.print_environment_info(return_string=True)
    True
    """
    devs = devices.devices()
    info = textwrap.dedent(f"""\
    xform:  {__version__}
    jaxlib: {importlib.metadata.version("jaxlib")}
    numpy:  {np.__version__}
    python: {sys.version.replace(chr(10), " ")}
    device info: {devs[0].device_kind}-{len(devs)}, {len(devices.local_devices())} local devices
    process_count: {distributed.process_count()}
    platform: {platform.uname()}""")
    for key, value in os.environ.items():
        if key.startswith(("JAX_", "XLA_", "XFORM_")):
            info += f"\n{key}={value}"
    smi = _nvidia_smi()
    if smi:
        info += "\n\n$ nvidia-smi\n" + smi
    if return_string:
        return info
    print(info)
    return None
