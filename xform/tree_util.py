"""Public pytree utilities (``jax.tree_util``); implemented in :mod:`xform.core.tree_util`."""
from xform.core.tree_util import *  # noqa: F401,F403
from xform.core.tree_util import __all__  # noqa: F401
