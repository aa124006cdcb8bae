"""``jax.experimental.pjit``: its ``pjit`` is ``jit`` (deprecated, as in JAX 0.10)."""
import warnings

from xform.transforms.jit import jit as _jit


def __getattr__(name):
    if name == "pjit":
        warnings.warn("jax.experimental.pjit.pjit has been deprecated. Please use "
                      "`jax.jit` instead.", DeprecationWarning, stacklevel=2)
        return _pjit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _pjit(fun, in_shardings=None, out_shardings=None, static_argnums=(),
          static_argnames=(), donate_argnums=(), donate_argnames=(), **kwargs):
    return _jit(fun, in_shardings=in_shardings, out_shardings=out_shardings,
                static_argnums=static_argnums, static_argnames=static_argnames,
                donate_argnums=donate_argnums, donate_argnames=donate_argnames, **kwargs)
