"""The typing names Optax exports: protocols for update, skip, condition and stateful
schedule functions, ``MaskOrFn``, and the state names of stateless transformations."""
from typing import Any, Callable, Optional, Protocol, Union

from xform.optim._base import EmptyState

#: A mask pytree, or a function from params to one (Optax's ``alias.MaskOrFn``).
MaskOrFn = Optional[Union[Any, Callable[[Any], Any]]]

# The states of stateless transformations, named as Optax names them.
AdaptiveGradClipState = ClipByGlobalNormState = ClipState = EmptyState
NonNegativeParamsState = ScaleState = ScaleByTrustRatioState = EmptyState


class TransformUpdateExtraArgsFn(Protocol):
    """``update(updates, state, params=None, **extra_args) -> (updates, state)``."""

    def __call__(self, updates, state, params=None, **extra_args): ...


class ShouldSkipUpdateFunction(Protocol):
    """``f(updates, gradient_step, params) -> (should_skip, aux)``, used by
    :class:`MultiSteps` to reject a step."""

    def __call__(self, updates, gradient_step, params): ...


class ConditionFn(Protocol):
    """``f(step, **extra_args) -> bool scalar``: whether a conditional transformation runs."""

    def __call__(self, step, **extra_args): ...


class StatefulSchedule(Protocol):
    """A schedule with state: ``init() -> s``, ``update(s, **extra) -> s``,
    ``__call__(s, **extra) -> value``."""

    def init(self): ...

    def update(self, state, **extra_args): ...

    def __call__(self, state, **extra_args): ...
