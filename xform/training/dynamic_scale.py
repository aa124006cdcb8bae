"""Dynamic loss scaling for float16 gradients (``flax.training.dynamic_scale``)."""
import functools
from typing import Any, NamedTuple

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core.tree_util import tree_leaves, tree_map
from xform.training import struct
from xform.transforms.ad import value_and_grad

__all__ = ["DynamicScale", "DynamicScaleResult"]


class DynamicScaleResult(NamedTuple):
    """What :meth:`DynamicScale.value_and_grad`'s function returns."""
    dynamic_scale: Any
    finite: Any
    aux: Any
    grad: Any


class DynamicScale(struct.PyTreeNode):
    """Loss scaling that grows the scale after ``growth_interval`` finite steps and
    backs off on a non-finite gradient.

    Attributes:
        growth_factor: scale multiplier after a finite period (static).
        backoff_factor: scale multiplier on a non-finite gradient (static).
        growth_interval: finite steps before growing (static).
        fin_steps: finite steps in a row so far.
        scale: the current loss scale.
        minimum_scale: lower bound of the scale (static; None: no bound).

    >>> import xform, xform.numpy as jnp
    >>> loss_fn = lambda p: p.astype(jnp.float16) ** 2
    >>> step = xform.jit(lambda ds, p: ds.value_and_grad(loss_fn)(p))
    >>> ds, finite, loss, grad = step(DynamicScale(), jnp.array(.5))
    >>> bool(finite), float(ds.scale)   # the float16 gradient overflows: back off
    (False, 32768.0)
    >>> ds, finite, loss, grad = step(ds, jnp.array(.5))
    >>> bool(finite), float(grad), int(ds.fin_steps)
    (True, 1.0, 1)
    """
    growth_factor: float = struct.field(pytree_node=False, default=2.0)
    backoff_factor: float = struct.field(pytree_node=False, default=0.5)
    growth_interval: int = struct.field(pytree_node=False, default=2000)
    fin_steps: int = 0
    scale: float = 65536.0
    minimum_scale: float = struct.field(pytree_node=False, default=np.finfo(np.float32).tiny)

    def value_and_grad(self, fun, argnums=0, has_aux=False, axis_name=None):
        """``xform.value_and_grad`` of ``fun`` with the loss scaled and the gradient
        unscaled (as float32), plus the updated scale.

        Args:
            fun: the loss function.
            argnums: which positional arguments to differentiate.
            has_aux: ``fun`` returns ``(loss, aux)``.
            axis_name: average the gradients over this pmap/shard_map axis.

        Returns:
            A function returning ``DynamicScaleResult(dynamic_scale, finite, aux, grad)``
            (``aux`` is the loss, or ``(loss, aux)`` with ``has_aux``).
        """
        @functools.wraps(fun)
        def loss_wrapper(*args):
            aux = fun(*args)
            return (self.scale * aux[0], aux[1]) if has_aux else self.scale * aux

        grad_fn = value_and_grad(loss_wrapper, argnums, has_aux)

        def grad_fn_wrapper(*args):
            aux, grad = grad_fn(*args)
            aux = (aux[0] / self.scale, aux[1]) if has_aux else aux / self.scale
            grad = tree_map(lambda g: jnp.asarray(g, jnp.float32) / self.scale, grad)
            if axis_name is not None:
                grad = lax.pmean(grad, axis_name)
            finite = jnp.array(True)
            for g in tree_leaves(grad):
                finite &= jnp.all(lax.is_finite(g))
            grow = self.fin_steps == self.growth_interval
            fin_scale = jnp.where(
                grow & finite,
                jnp.minimum(self.scale * self.growth_factor, jnp.finfo(jnp.float32).max),
                self.scale)
            inf_scale = self.scale * self.backoff_factor
            if self.minimum_scale is not None:
                inf_scale = jnp.maximum(inf_scale, self.minimum_scale)
            new_scale = jnp.where(finite, fin_scale, inf_scale)
            new_fin_steps = jnp.where(grow | (~finite), 0, self.fin_steps + 1)
            new_self = self.replace(fin_steps=new_fin_steps, scale=new_scale)
            return DynamicScaleResult(new_self, finite, aux, grad)

        return grad_fn_wrapper
