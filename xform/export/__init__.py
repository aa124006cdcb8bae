"""``xform.export``: JAX's ``jax.export`` on xform (same serialized format).

>>> import numpy as np, xform, xform.numpy as jnp
>>> from xform import export
>>> exp = export.export(xform.jit(jnp.sin))(xform.ShapeDtypeStruct((3,), np.float32))
>>> restored = export.deserialize(exp.serialize())
>>> restored.call(np.zeros(3, np.float32))
Array([0., 0., 0.], dtype=float32)
"""
from xform.export._export import (  # noqa: F401
    Exported, default_export_platform,
    deserialize, export, maximum_supported_calling_convention_version,
    minimum_supported_calling_convention_version, symbolic_args_specs)
from xform.export._call import call  # noqa: F401
from xform.export._checks import DisabledSafetyCheck  # noqa: F401
from xform.core.shape_poly import (  # noqa: F401
    InconclusiveDimensionOperation, SymbolicScope, is_symbolic_dim, symbolic_shape)
from xform.export._pytrees import (  # noqa: F401
    register_namedtuple_serialization, register_pytree_node_serialization)

__all__ = ["DisabledSafetyCheck", "Exported", "InconclusiveDimensionOperation",
           "SymbolicScope", "call", "default_export_platform", "deserialize", "export",
           "is_symbolic_dim", "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version",
           "register_namedtuple_serialization", "register_pytree_node_serialization",
           "symbolic_args_specs", "symbolic_shape"]
