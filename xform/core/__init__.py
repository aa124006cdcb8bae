"""xform's core (layer 1): avals, tracers, jaxprs, config, pytrees, shardings.

As a face it is JAX's ``jax.core``, which keeps few public names: ``ShapedArray``,
``Trace``, ``Tracer``, ``eval_jaxpr``, ``max_dim``, ``min_dim`` and the type aliases
``Atom``, ``Value``, ``ParamDict`` (JAX's ``AbstractValue`` base, ``eval_context`` and
``ensure_compile_time_eval`` are not here: the last is ``xform.ensure_compile_time_eval``).
They load on first use (PEP 562), so importing one core module runs no others."""
import importlib
from typing import Any, Union

_PUBLIC = {"ShapedArray": "avals", "Trace": "trace", "Tracer": "trace",
           "eval_jaxpr": "jaxpr", "max_dim": "shape_poly", "min_dim": "shape_poly"}


def __getattr__(name):
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    if name in ("Atom", "Value", "ParamDict"):
        jaxpr = importlib.import_module(f"{__name__}.jaxpr")
        return {"Atom": Union[jaxpr.Var, jaxpr.Literal], "Value": Any,
                "ParamDict": dict[str, Any]}[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
