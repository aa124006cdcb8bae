"""``TrainState`` (``flax.training.train_state``): the step, params, optimizer and its
state in one pytree, so a whole training step is one jitted function of it."""
from typing import Any, Callable

from xform import optim
from xform.training import struct

OVERWRITE_WITH_GRADIENT = "_overwrite_with_gradient"


class TrainState(struct.PyTreeNode):
    """Training state for a single-model, single-optimizer loop.

    A registered pytree dataclass: ``step``, ``params`` and ``opt_state`` are children;
    ``apply_fn`` and ``tx`` are static (part of the treedef), so the state passes through
    ``jit``/``pmap`` and :mod:`xform.checkpoint` whole. Subclass it to carry more
    (e.g. ``batch_stats``).

    Attributes:
        step: number of ``apply_gradients`` calls so far.
        apply_fn: the model's apply function (e.g. ``model.apply``).
        params: the parameters.
        tx: an ``xform.optim`` gradient transformation.
        opt_state: ``tx``'s state.

    Example:
        >>> import xform, xform.numpy as jnp, xform.optim as optax
        >>> from xform.training.train_state import TrainState
        >>> state = TrainState.create(apply_fn=lambda p, x: p['w'] * x,
        ...                           params={'w': jnp.ones(2)}, tx=optax.sgd(0.5))
        >>> @xform.jit
        ... def train_step(state, x):
        ...     grads = xform.grad(lambda p: jnp.sum(state.apply_fn(p, x)))(state.params)
        ...     return state.apply_gradients(grads=grads)
        >>> state = train_step(state, jnp.array([1., 2.]))
        >>> int(state.step), state.params['w']
        (1, Array([0.5, 0. ], dtype=float32))
    """
    step: Any
    apply_fn: Callable = struct.field(pytree_node=False)
    params: Any = struct.field(pytree_node=True)
    tx: Any = struct.field(pytree_node=False)
    opt_state: Any = struct.field(pytree_node=True)

    def apply_gradients(self, *, grads, **kwargs):
        """One optimizer step: ``tx.update`` then ``apply_updates``; ``step`` grows by one.

        Extra keyword arguments replace fields too (e.g. ``batch_stats=``). With a
        ``'_overwrite_with_gradient'`` collection in ``grads``, only ``grads['params']``
        goes through ``tx`` and that collection's values replace the params' own.

        Returns:
            The new state.
        """
        overwrite = isinstance(grads, dict) and OVERWRITE_WITH_GRADIENT in grads
        g = grads["params"] if overwrite else grads
        p = self.params["params"] if overwrite else self.params
        updates, new_opt_state = self.tx.update(g, self.opt_state, p)
        new_p = optim.apply_updates(p, updates)
        if overwrite:
            new_p = {"params": new_p, OVERWRITE_WITH_GRADIENT: grads[OVERWRITE_WITH_GRADIENT]}
        return self.replace(step=self.step + 1, params=new_p, opt_state=new_opt_state,
                            **kwargs)

    @classmethod
    def create(cls, *, apply_fn, params, tx, **kwargs):
        """A fresh state at step 0 with ``opt_state = tx.init(params)``.

        Raises:
            TypeError: ``tx`` is not a gradient transformation.
        """
        if not (hasattr(tx, "init") and hasattr(tx, "update")):
            raise TypeError(f"TrainState.create: tx must be an xform.optim "
                            f"GradientTransformation, got {type(tx).__name__}: {tx!r}")
        overwrite = isinstance(params, dict) and OVERWRITE_WITH_GRADIENT in params
        opt_state = tx.init(params["params"] if overwrite else params)
        return cls(step=0, apply_fn=apply_fn, params=params, tx=tx, opt_state=opt_state,
                   **kwargs)
