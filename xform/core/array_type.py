"""``xform.Array`` (also ``xform.numpy.ndarray``), the public array type, for
``isinstance`` checks and annotations: as with ``jax.Array``, concrete arrays *and*
tracers are instances, so user code that branches on it takes the same branch eagerly
and inside jit, grad or vmap. A virtual class: internal code tests the concrete
class, ``core.array.Array`` (what ``type(x)`` is), and tracers stay tracers."""
from xform.core.array import Array as _Concrete
from xform.core.trace import Tracer


class _ArrayMeta(type):
    def __instancecheck__(cls, instance):
        return isinstance(instance, (_Concrete, Tracer))

    def __subclasscheck__(cls, subclass):   # (a tracer type is no subclass, as in JAX)
        return issubclass(subclass, _Concrete)


class Array(_Concrete, metaclass=_ArrayMeta):
    """The type of xform's arrays (``isinstance`` holds for traced values too; its
    attributes are the concrete class's, e.g. ``xform.Array.sum``; no value is ever
    of this class itself).

    >>> import numpy as np, xform, xform.numpy as jnp
    >>> isinstance(jnp.arange(2), xform.Array), isinstance(np.zeros(2), xform.Array)
    (True, False)
    >>> xform.jit(lambda x: isinstance(x, xform.Array))(1.0)
    Array(True, dtype=bool)
    """
    __slots__ = ()
