"""The operators and NumPy-style methods of ``Array`` and ``Tracer``, declared once on
``ArrayOps``, the base class both share, so concrete and traced values behave alike
(``x + 1``, ``x[0]``, ``x.sum()``, ``x.at[i].set(v)``).

Their implementations are ``xform.numpy`` functions (``x + y`` is ``jnp.add``) and numpy
sits above core, so numpy fills them in: ``xform/__init__.py`` imports ``xform.numpy``,
whose ``_array_methods.install`` puts the implementations on ``ArrayOps`` (no extra call
on the hot path). Every import of an xform module runs the package first, so user code
always sees them; until then each name is a stub that says so (an xform module using an
operator while the package is being imported).

NB: JAX sets these attributes on its Tracer and ArrayImpl classes when ``jax.numpy`` is
imported (``jax/_src/numpy/array_methods.py``); xform declares them with the types.
"""

BINARY = ("add", "sub", "mul", "truediv", "floordiv", "divmod", "mod", "pow", "matmul",
          "and", "or", "xor", "lshift", "rshift")
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
METHODS = (
    ("__getitem__", "__setitem__", "__contains__", "__neg__", "__pos__", "__abs__",
     "__invert__", "__round__", "__array_namespace__", "__array_module__")
    + tuple(f"__{n}__" for n in BINARY) + tuple(f"__r{n}__" for n in BINARY)
    + tuple(f"__{n}__" for n in COMPARISONS)
    + ("astype", "reshape", "transpose", "ravel", "flatten", "squeeze", "swapaxes", "clip",
       "dot", "sum", "prod", "mean", "var", "std", "max", "min", "any", "all", "argmax",
       "argmin", "cumsum", "cumprod", "sort", "argsort", "argpartition", "searchsorted",
       "nonzero", "round", "take", "choose", "compress", "repeat", "diagonal", "trace",
       "ptp", "conj", "conjugate", "copy", "to_device", "view"))
PROPERTIES = ("at", "T", "mT", "real", "imag", "flat")


class ArrayOps:
    """Base of ``Array`` and ``Tracer``: operators and array methods (see module doc)."""
    __slots__ = ()


def _not_installed(name):
    raise AttributeError(f"ArrayOps.{name} used before xform.numpy installed it (an "
                         "xform module uses it while the package is being imported)")


def _method_stub(name):
    def stub(self, *args, **kwargs):
        _not_installed(name)
    stub.__name__ = name
    return stub


def _property_stub(name):
    return property(lambda self: _not_installed(name))


_stubs = {**{n: _method_stub(n) for n in METHODS}, **{n: _property_stub(n) for n in PROPERTIES}}
for _name, _stub in _stubs.items():
    setattr(ArrayOps, _name, _stub)


def install(methods):
    """Called by ``xform.numpy``: the implementations, one per declared name."""
    missing = set(_stubs) ^ set(methods)
    if missing:
        raise AssertionError(f"ArrayOps names and xform.numpy methods differ: {missing}")
    for name, fn in methods.items():
        setattr(ArrayOps, name, fn)
