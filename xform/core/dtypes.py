"""Dtypes for xform: the supported dtype set, x64 canonicalization, and JAX's type
promotion lattice with weak types (``promote_types``, ``result_type``).

The face of ``dtype_table.py`` (the dtypes, canonicalization, inspection, queries) and
``dtype_promotion.py`` (the lattice).
"""
from xform.core.dtype_promotion import promote_types, result_type  # noqa: F401
from xform.core.dtype_table import *  # noqa: F401,F403
