"""``jax.experimental.compute_on``: run part of a jitted function on another compute type
(``device_host``: the host CPU of an accelerator; ``device``; ``tpu_sparsecore``;
``gpu_stream:N``).

``with compute_on(t):`` marks every equation staged in the block with ``t``, and lowering
puts ``t`` on their ops as XLA frontend attributes, as JAX 0.10.2's (legacy) context
manager does; ``compute_on2(f, compute_type=t, out_memory_spaces=...)`` instead wraps
``f`` in one ``compute_on`` call (``interpreters/compute_on.py``) whose results go to the
memory spaces given. On CPU, as in JAX, the marks change no values.
"""
import contextlib
import json

from xform.core import tree_util
from xform.core.avals import MemorySpace
from xform.core.jaxpr import compute_type_context
from xform.core.trace import get_aval
from xform.interpreters import partial_eval as pe
from xform.interpreters.compute_on import compute_on_p

__all__ = ["compute_on", "compute_on2"]


def _check_valid(compute_type):
    if not isinstance(compute_type, str):
        raise TypeError("`compute_on`'s compute_type argument must be a string.")
    if compute_type not in ("device_host", "device", "tpu_sparsecore") and \
            not compute_type.startswith("gpu_stream:"):
        raise ValueError(
            f"Invalid compute type {compute_type}. Current supported values are "
            "`device_host`, `device`, `tpu_sparsecore`, and `gpu_stream:#`.")


@contextlib.contextmanager
def compute_on(compute_type: str):
    """Within the block, operations staged into a jaxpr run on ``compute_type``.

    >>> import xform, xform.numpy as jnp
    >>> from xform.experimental.compute_on import compute_on
    >>> @xform.jit
    ... def f(x):
    ...   with compute_on("device_host"):
    ...     return jnp.sin(x)
    >>> '_xla_compute_type = "host"' in f.lower(jnp.ones(2)).as_text()
    True
    """
    _check_valid(compute_type)
    with compute_type_context(compute_type):
        yield


def compute_on2(f=None, *, compute_type, out_memory_spaces, compiler_options=None):
    """``f`` as one call on ``compute_type``; its outputs go to ``out_memory_spaces`` (a
    ``MemorySpace`` per output, or a tree prefix of ``f``'s outputs). Use as a
    decorator too: ``@compute_on2(compute_type=..., out_memory_spaces=...)``."""
    if f is None:
        return lambda g: compute_on2(g, compute_type=compute_type,
                                     out_memory_spaces=out_memory_spaces,
                                     compiler_options=compiler_options)
    _check_valid(compute_type)
    options = None if compiler_options is None else json.dumps(compiler_options)

    def wrapped(*args):
        flat, in_tree = tree_util.tree_flatten(args)
        with compute_type_context(compute_type):
            closed, consts, out_tree = pe.trace_to_subjaxpr(
                f, in_tree, [get_aval(x) for x in flat])
        spaces = _flat_spaces(out_memory_spaces, out_tree)
        outs = compute_on_p.bind(*consts, *flat, jaxpr=closed, compute_type=compute_type,
                                 out_memory_spaces=spaces, compiler_options_json=options)
        return tree_util.tree_unflatten(out_tree, outs)
    return wrapped


def _flat_spaces(out_memory_spaces, out_tree):
    dummy = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
    try:
        spaces = tree_util.broadcast_prefix(out_memory_spaces, dummy)
    except ValueError as e:
        raise ValueError("compute_on out_memory_spaces specification must be a tree "
                         f"prefix of the corresponding value; {e}") from None
    for s in spaces:
        if not isinstance(s, MemorySpace):
            raise TypeError("compute_on2's out_memory_spaces must hold "
                            f"jax.memory.Space values, got {s!r}.")
    return tuple(spaces)
