"""Contributed optimizers (``optax.contrib``): Muon, SAM, AdEMAMix, Prodigy, Schedule-Free,
D-Adaptation, Mechanic, COCOB, DoG/DoWG, MoMo, reduce-on-plateau and friends.

Example:
    >>> import xform.numpy as jnp, xform.optim as optax
    >>> tx = optax.contrib.ademamix(1e-2)
    >>> params = {'w': jnp.ones(2)}
    >>> updates, state = tx.update(params, tx.init(params), params)
    >>> updates['w'].shape
    (2,)
"""
from xform.optim.contrib._muon import (  # noqa: F401
    MuonDimensionNumbers, MuonState, muon, scale_by_muon)
