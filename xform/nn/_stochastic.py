"""``nn.Dropout`` and ``nn.Sequential`` (Flax linen's stochastic and combinator layers)."""
import xform.numpy as jnp
from xform import lax, random
from xform.nn._module import Module, compact, merge_param


class Dropout(Module):
    """Zeroes inputs with probability ``rate`` and scales the rest by ``1/(1-rate)``.

    Needs the ``rng_collection`` stream (default ``'dropout'``) unless
    ``deterministic``; ``broadcast_dims`` share one mask along those axes.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> m = nn.Dropout(0.5, deterministic=False)
    >>> y = m.apply({}, jnp.ones(4), rngs={'dropout': xform.random.PRNGKey(0)})
    >>> sorted(set(y.tolist()) | {0.0, 2.0})
    [0.0, 2.0]
    """
    rate: float
    broadcast_dims: tuple = ()
    deterministic: object = None
    rng_collection: str = "dropout"

    @compact
    def __call__(self, inputs, deterministic=None, rng=None):
        deterministic = merge_param("deterministic", self.deterministic, deterministic)
        if self.rate == 0.0 or deterministic:
            return inputs
        if self.rate == 1.0:
            return jnp.zeros_like(inputs)
        keep_prob = 1.0 - self.rate
        if rng is None:
            rng = self.make_rng(self.rng_collection)
        shape = list(inputs.shape)
        for dim in self.broadcast_dims:
            shape[dim] = 1
        mask = jnp.broadcast_to(random.bernoulli(rng, p=keep_prob, shape=shape),
                                inputs.shape)
        return lax.select(mask, inputs / keep_prob, jnp.zeros_like(inputs))


class Sequential(Module):
    """Applies ``layers`` in order; a tuple output is splatted into the next layer's
    positional arguments, a dict into its keyword arguments.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> m = nn.Sequential([nn.Dense(4), nn.relu, nn.Dense(2)])
    >>> sorted(m.init(xform.random.PRNGKey(0), jnp.ones((1, 3)))['params'])
    ['layers_0', 'layers_2']
    """
    layers: tuple

    def __post_init__(self):
        if not isinstance(self.layers, (list, tuple)):
            raise ValueError(f"'layers' must be a sequence, got "
                             f"'{type(self.layers).__name__}'.")
        super().__post_init__()

    @compact
    def __call__(self, *args, **kwargs):
        if not self.layers:
            raise ValueError(f"Empty Sequential module {self.name}.")
        outputs = self.layers[0](*args, **kwargs)
        for layer in self.layers[1:]:
            if isinstance(outputs, tuple):
                outputs = layer(*outputs)
            elif isinstance(outputs, dict):
                outputs = layer(**outputs)
            else:
                outputs = layer(outputs)
        return outputs
