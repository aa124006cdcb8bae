"""Loss scaling for float16 training, as DeepMind's ``jmp``: multiply the loss by a large
scale before differentiating so small gradients do not flush to zero in float16, divide
the gradients by it afterwards, and (dynamic scaling) halve the scale on overflow and
double it after ``period`` finite steps."""
import dataclasses

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util as tu

__all__ = ["all_finite", "select_tree", "NoOpLossScale", "StaticLossScale",
           "DynamicLossScale", "Policy", "get_policy", "cast_to_half_precision",
           "cast_to_full"]


def all_finite(tree):
    """A scalar bool: True when every element of every leaf is finite.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.all_finite({'a': jnp.ones(2), 'b': jnp.array([jnp.inf])})
        Array(False, dtype=bool)
    """
    leaves = tu.tree_leaves(tree)
    if not leaves:
        return jnp.array(True)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def select_tree(pred, a, b):
    """``a`` where the scalar ``pred`` is True, else ``b`` (same structure).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.select_tree(jnp.array(False), jnp.ones(1), jnp.zeros(1))
        Array([0.], dtype=float32)
    """
    pred = jnp.asarray(pred)
    if pred.shape != () or pred.dtype != np.dtype(bool):
        raise ValueError(f"select_tree: pred must be a scalar bool, got {pred.dtype}"
                         f"{list(pred.shape)}")
    return tu.tree_map(lambda x, y: lax.select(pred, x, y), a, b)


class NoOpLossScale:
    """No loss scaling (``loss_scale`` is 1)."""

    @property
    def loss_scale(self):
        return jnp.ones([], jnp.float32)

    def scale(self, tree):
        return tree

    def unscale(self, tree):
        return tree

    def adjust(self, grads_finite):
        del grads_finite
        return self


tu.register_pytree_node(NoOpLossScale, lambda s: ((), None), lambda _, __: NoOpLossScale())


@dataclasses.dataclass(frozen=True)
class StaticLossScale:
    """A fixed loss scale."""
    loss_scale: object

    def scale(self, tree):
        return tu.tree_map(lambda x: x * jnp.asarray(self.loss_scale).astype(x.dtype), tree)

    def unscale(self, tree):
        inv = 1 / jnp.asarray(self.loss_scale)
        return tu.tree_map(lambda x: x * inv.astype(x.dtype), tree)

    def adjust(self, grads_finite):
        del grads_finite
        return self


tu.register_pytree_node(StaticLossScale, lambda s: ((s.loss_scale,), None),
                        lambda _, c: StaticLossScale(*c))


@dataclasses.dataclass(frozen=True)
class DynamicLossScale:
    """A loss scale that halves when gradients overflow and grows by ``factor`` after
    ``period`` consecutive finite steps. A pytree (``loss_scale`` and ``counter`` are
    leaves), so it lives in the training state and goes through ``jit``.

    Example:
        >>> import xform, xform.numpy as jnp, xform.optim as optax
        >>> ls = optax.DynamicLossScale(jnp.float32(2 ** 10))
        >>> grads = ls.unscale(xform.grad(lambda w: ls.scale(w * w))(jnp.float16(3.)))
        >>> grads, optax.all_finite(grads)
        (Array(6., dtype=float16), Array(True, dtype=bool))
        >>> ls.adjust(jnp.array(False)).loss_scale
        Array(512., dtype=float32)
    """
    loss_scale: object
    counter: object = dataclasses.field(default_factory=lambda: np.zeros([], np.int32))
    period: int = 2000
    factor: int = 2
    min_loss_scale: object = dataclasses.field(default_factory=lambda: np.ones([], np.float32))

    def scale(self, tree):
        """Multiply every leaf by the loss scale (cast to the leaf's dtype)."""
        return tu.tree_map(lambda x: x * jnp.asarray(self.loss_scale).astype(x.dtype), tree)

    def unscale(self, tree):
        """Divide every leaf by the loss scale."""
        inv = 1 / jnp.asarray(self.loss_scale)
        return tu.tree_map(lambda x: x * inv.astype(x.dtype), tree)

    def adjust(self, grads_finite):
        """The next loss scale: grown after ``period`` finite steps, divided by ``factor``
        (not below ``min_loss_scale``) when ``grads_finite`` is False."""
        grads_finite = jnp.asarray(grads_finite)
        scale = jnp.asarray(self.loss_scale)
        counter = jnp.asarray(self.counter)
        grown = scale * self.factor
        grown = lax.select(jnp.all(jnp.isfinite(grown)), grown, scale)
        new_scale = lax.select(
            grads_finite,
            lax.select(counter == (self.period - 1), grown, scale),
            jnp.maximum(jnp.asarray(self.min_loss_scale, scale.dtype), scale / self.factor))
        new_counter = ((counter + jnp.ones([], counter.dtype)) % self.period) \
            * grads_finite.astype(counter.dtype)
        return DynamicLossScale(new_scale, new_counter, self.period, self.factor,
                                self.min_loss_scale)


tu.register_pytree_node(
    DynamicLossScale,
    lambda s: ((s.loss_scale, s.counter), (s.period, s.factor, np.asarray(s.min_loss_scale)
                                           .item())),
    lambda aux, c: DynamicLossScale(c[0], c[1], aux[0], aux[1],
                                    np.asarray(aux[2], np.float32)))


# ---------------------------------------------------------------- mixed-precision policies

_DTYPE_NAMES = {"float16": "float16", "f16": "float16", "half": "float16",
                "bfloat16": "bfloat16", "bf16": "bfloat16", "float32": "float32",
                "f32": "float32", "full": "float32", "float64": "float64", "f64": "float64"}


def _parse_dtype(name, policy_name):
    key = name.strip().lower()
    if key not in _DTYPE_NAMES:
        raise ValueError(f"Unknown dtype {name!r} in policy {policy_name!r}; use one of "
                         f"{sorted(_DTYPE_NAMES)}")
    return jnp.dtype(_DTYPE_NAMES[key])


def _cast_floating(tree, dtype):
    def cast(x):
        if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating):
            return x.astype(dtype)
        return x
    return tu.tree_map(cast, tree)


def cast_to_half_precision(tree, dtype="float16"):
    """Cast the floating leaves of ``tree`` to ``dtype`` (other leaves unchanged)."""
    return _cast_floating(tree, jnp.dtype(dtype))


def cast_to_full(tree):
    """Cast the floating leaves of ``tree`` to float32."""
    return _cast_floating(tree, jnp.dtype("float32"))


@dataclasses.dataclass(frozen=True)
class Policy:
    """A mixed-precision policy (jmp's): the dtypes of the parameters, of the computation
    and of the outputs. The ``cast_to_*`` methods cast only floating-point leaves.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> policy = optax.get_policy("params=float32,compute=bfloat16,output=float32")
        >>> policy.cast_to_compute({'w': jnp.ones(1), 'step': jnp.int32(3)})['w'].dtype
        dtype(bfloat16)
    """
    param_dtype: object
    compute_dtype: object
    output_dtype: object

    def cast_to_param(self, x):
        return _cast_floating(x, self.param_dtype)

    def cast_to_compute(self, x):
        return _cast_floating(x, self.compute_dtype)

    def cast_to_output(self, x):
        return _cast_floating(x, self.output_dtype)

    def with_output_dtype(self, output_dtype):
        return dataclasses.replace(self, output_dtype=jnp.dtype(output_dtype))

    def __str__(self):
        return (f"p={jnp.dtype(self.param_dtype).name},c={jnp.dtype(self.compute_dtype).name},"
                f"o={jnp.dtype(self.output_dtype).name}")


def get_policy(policy_name):
    """Parse a policy such as ``"params=float32,compute=float16,output=float32"`` (also
    ``"p=f32,c=bf16,o=f32"``, or one dtype for all three, e.g. ``"float32"``); unnamed
    parts default to float32.

    Example:
        >>> import xform.optim as optax
        >>> str(optax.get_policy("p=f32,c=f16"))
        'p=float32,c=float16,o=float32'
    """
    if not isinstance(policy_name, str) or not policy_name.strip():
        raise ValueError(f"get_policy: expected a policy string, got {policy_name!r}")
    if "=" not in policy_name:
        d = _parse_dtype(policy_name, policy_name)
        return Policy(d, d, d)
    dtypes = {"params": jnp.dtype("float32"), "compute": jnp.dtype("float32"),
              "output": jnp.dtype("float32")}
    names = {"p": "params", "params": "params", "c": "compute", "compute": "compute",
             "o": "output", "output": "output"}
    for part in policy_name.split(","):
        key, _, value = part.partition("=")
        if key.strip() not in names:
            raise ValueError(f"Unknown key {key.strip()!r} in policy {policy_name!r}; use "
                             "'params', 'compute' or 'output'")
        dtypes[names[key.strip()]] = _parse_dtype(value, policy_name)
    return Policy(dtypes["params"], dtypes["compute"], dtypes["output"])
