"""Operand handling shared by xform.numpy: array-likes to Arrays/Tracers, JAX's dtype
promotion with weak types, and NumPy broadcasting on top of lax's equal-shape ops.

lax binary ops want equal dtypes and equal shapes (a rank-0 operand broadcasts), so
every NumPy-style function here first *promotes* (one ``convert_element_type`` per
operand whose dtype differs from the promoted one) and then *broadcasts* (one
``broadcast_in_dim`` per operand whose non-scalar shape differs). Operands that already
fit cost nothing: this keeps ``x + 1`` and ``x * y`` at one primitive.
"""
import operator
import warnings

import numpy as np

from xform import lax
from xform.core import dtypes, shape_poly
from xform.core.array import Array
from xform.core.config import config
from xform.core.trace import Tracer, concrete_or_raise
from xform.core.transfer import device_put_value, scalar_array

PY_SCALARS = (bool, int, float, complex)
_PY_SCALAR_SET = frozenset(PY_SCALARS)


def is_array(x):
    """Whether ``x`` is an xform Array or a tracer of any transformation."""
    return type(x) is Array or isinstance(x, (Tracer, Array))


def is_arraylike(x):
    return (type(x) in _PY_SCALAR_SET or type(x) is Array or isinstance(x, (Tracer, Array))
            or isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)))


def check_arraylike(name, *args):
    for pos, x in enumerate(args):
        if not is_arraylike(x):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got "
                            f"{type(x)} at position {pos}.")


def scalar_operand(value, dtype, weak_type):
    """A rank-0 Array for a Python scalar; out-of-range ints wrap (as in JAX); a
    symbolic dimension is computed from the dimension variables."""
    if shape_poly.is_symbolic_dim(value):
        return lax.convert_element_type(lax.shapes.dimension_as_value(value), dtype)
    try:
        return scalar_array(value, dtype, weak_type)
    except OverflowError:
        if type(value) is not int or not dtypes.is_integer(dtype):
            raise
        if not -2**63 <= value < 2**64:
            raise OverflowError(f"Python int {value} too large to convert to "
                                f"{np.dtype(dtype).name}") from None
        base = np.asarray(value, np.uint64 if value >= 2**63 else np.int64)
        return scalar_array(int(base.astype(dtype)), dtype, weak_type)


def asarray(x, name="asarray", pos=0):
    """``x`` as an Array or Tracer; Python scalars become weak rank-0 Arrays."""
    if type(x) is Array or isinstance(x, (Tracer, Array)):
        return x
    t = type(x)
    if t in _PY_SCALAR_SET:
        return scalar_operand(x, dtypes.dtype(x), t is not bool)
    if isinstance(x, np.generic):  # cached like Python scalars, but strongly typed
        return scalar_operand(x.item(), dtypes.canonicalize_dtype(x.dtype), False)
    if isinstance(x, np.ndarray):
        return device_put_value(x)
    if shape_poly.is_symbolic_dim(x):   # computed from the dimension variables (JAX's)
        return lax.convert_element_type(lax.shapes.dimension_as_value(x), dtypes.int32, True)
    for base in (int, float, complex):  # subclasses, e.g. IntEnum members
        if isinstance(x, base):
            return asarray(base(x))
    raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(x)} at "
                    f"position {pos}.")


def aval(x):
    try:
        return x.aval
    except AttributeError:
        return asarray(x).aval


def shape(x):
    try:
        return x.aval.shape
    except AttributeError:
        return np.shape(x)


def convert(x, dtype, weak_type=False):
    """``x`` (array or Python scalar) as ``dtype``; no-op when the dtype already matches.

    Concrete arrays whose dtype matches keep their weak type: lax's rule (the result
    is weak only when all operands are) gives the promoted weak type anyway. A weak
    tracer made strong records JAX's weak-to-strong ``convert_element_type``, whose JVP
    makes its tangent strong and whose transpose makes its cotangent weak again.
    """
    if type(x) in _PY_SCALAR_SET:
        return scalar_operand(x, dtype, weak_type)
    x = asarray(x)
    a = x.aval
    if a.dtype == dtype and (weak_type or not a.weak_type or type(x) is Array):
        return x
    return lax.convert_element_type(x, dtype, weak_type)


def result_type(*args):
    """(dtype, weak_type) of JAX's promotion of ``args``."""
    return dtypes.result_type(*args, return_weak_type_flag=True)


def _to_numeric(dt):
    return dtypes.int32 if dt == dtypes.bool_ else dt  # int32 even with x64, as JAX


def promote_dtypes(name, *args, to=None):
    """Convert ``args`` to their promoted dtype (``to``: None, "inexact" or "numeric")."""
    check_arraylike(name, *args)
    dt, weak = result_type(*args)
    if to == "inexact":
        dt = dtypes.to_inexact_dtype(dt)
    elif to == "numeric":
        dt = _to_numeric(dt)
    return [convert(x, dt, weak) for x in args]


def promote_dtypes_exact(name, *args, to=None):
    """:func:`promote_dtypes`, also making a weak operand of the promoted dtype strong
    where the promotion is strong (JAX's ``promote_dtypes``): for results that are
    not one lax elementwise op of all the operands (``.at[]`` updates, concatenation)."""
    out = promote_dtypes(name, *args, to=to)
    if all(x.aval.weak_type for x in out):
        return out
    return [lax.convert_element_type(x, x.aval.dtype, False) if x.aval.weak_type else x
            for x in out]


def broadcast_shapes(*shapes, name=None):
    """NumPy's broadcast of ``shapes``; ValueError naming all of them if incompatible."""
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return tuple(shapes[0])
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            where = f"{name}: " if name else ""
            raise ValueError(f"{where}Incompatible shapes for broadcasting: shapes="
                             f"{[tuple(s) for s in shapes]}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to(x, shape):
    """Broadcast array ``x`` to ``shape`` (NumPy rules: align trailing dimensions)."""
    x = asarray(x)
    old = x.aval.shape
    shape = tuple(shape)
    if old == shape:
        return x
    nlead = len(shape) - len(old)
    if nlead < 0 or any(o not in (1, s) for o, s in zip(old, shape[nlead:])):
        raise ValueError(f"Incompatible shapes for broadcasting: {old} and requested "
                         f"shape {shape}")
    # broadcast_in_dim also grows size-1 operand dimensions.
    return lax.broadcast_in_dim(x, shape, tuple(range(nlead, len(shape))))


def broadcast_arrays(name, *xs, scalars_ok=True, explicit=False):
    """Broadcast arrays to one shape; rank-0 operands stay rank 0 if ``scalars_ok``
    (lax broadcasts them itself). Unless ``explicit`` (``jnp.broadcast_arrays``), a
    rank promotion is what ``jax_numpy_rank_promotion`` checks."""
    shapes = [x.aval.shape for x in xs]
    out_shape = broadcast_shapes(*shapes, name=name)
    if not explicit and config.jax_numpy_rank_promotion != "allow" and len(
            {len(s) for s in shapes if s}) > 1:
        _rank_promotion(name, shapes)
    return [x if s == out_shape or (scalars_ok and not s) else broadcast_to(x, out_shape)
            for x, s in zip(xs, shapes)]


def _rank_promotion(name, shapes):
    """JAX's warning or error for an implicit rank promotion."""
    shapes = " ".join(map(str, shapes))
    if config.jax_numpy_rank_promotion == "warn":
        warnings.warn(f"Following NumPy automatic rank promotion for {name} on shapes "
                      f"{shapes}. Set the jax_numpy_rank_promotion config option to "
                      "'allow' to disable this warning; for more information, see "
                      "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")
    else:
        raise ValueError(f"Operands could not be broadcast together for {name} on shapes "
                         f"{shapes} and with the config option "
                         "jax_numpy_rank_promotion='raise'. For more information, see "
                         "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")


def promote_args(name, *args, to=None):
    """Promote dtypes, then broadcast shapes: ready for a lax elementwise op."""
    return broadcast_arrays(name, *promote_dtypes(name, *args, to=to))


def canonicalize_axis(axis, ndim, name="axis"):
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {axis!r}") from None
    if not -ndim <= a < ndim:
        raise ValueError(f"axis {a} is out of bounds for array of dimension {ndim}")
    return a % ndim


def canonicalize_axes(axis, ndim):
    """``axis`` (None, int or sequence) as a sorted-free tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(canonicalize_axis(a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"duplicate value in 'axis': {axis}")
    return out


def canonical_shape(shape, name="shape"):
    """A tuple of non-negative ints from an int or a sequence of ints."""
    if isinstance(shape, (int, np.integer)) or (is_array(shape) and not shape.aval.shape) \
            or (type(shape) is np.ndarray and not shape.shape):   # (0-d NumPy: as JAX's)
        shape = (shape,)
    try:
        out = tuple(d if shape_poly.is_symbolic_dim(d) else operator.index(d)
                    for d in shape)
    except TypeError:
        raise TypeError(f"{name} must be an int or a sequence of ints, got "
                        f"{shape!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"negative dimensions are not allowed, got {name} {out}")
    return out


def user_dtype(dtype):
    """The canonical dtype of a user-given dtype-like, or None."""
    return None if dtype is None else dtypes.canonicalize_dtype(dtype)


def lax_const(x, value):
    """``value`` as a rank-0 constant of ``x``'s dtype, weak only where ``x`` is a weak
    scalar: JAX's ``lax._const``, whose strong NumPy constant makes a formula over a
    weak array strong (``jnp.hypot(int_array, 2.0)`` is float32, not weak)."""
    return scalar_operand(value, x.aval.dtype, x.aval.weak_type and not x.aval.shape)


def filled_like(x, value):
    """``value`` broadcast to ``x``'s shape, dtype and weak type."""
    fill = scalar_operand(value, x.aval.dtype, x.aval.weak_type)
    return lax.broadcast_in_dim(fill, x.aval.shape, ())


def concrete_or_error(x, what, name):
    """``x`` as a NumPy value if it is concrete; ConcretizationTypeError naming the
    argument ``what`` of ``jnp.name`` if it is traced."""
    return np.asarray(concrete_or_raise(
        x, f"The argument '{what}' of jnp.{name} must be concrete here: its value decides "
        f"the output shape. Pass it as a static value, or use the `size=` argument where "
        f"jnp.{name} has one.\n"))
