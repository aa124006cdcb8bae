"""Early stopping on a plateauing metric (``flax.training.early_stopping``)."""
import math

from xform.training import struct

__all__ = ["EarlyStopping"]


class EarlyStopping(struct.PyTreeNode):
    """Stops training once the metric has not improved by ``min_delta`` for more than
    ``patience`` consecutive updates.

    Attributes:
        min_delta: smallest decrease that counts as an improvement.
        patience: number of updates without improvement tolerated.
        best_metric: best value so far.
        patience_count: updates since the last improvement.
        should_stop: whether to stop.
        has_improved: whether the last update improved.

    >>> es = EarlyStopping(min_delta=1e-3, patience=2)
    >>> for epoch, loss in enumerate([4, 3, 3, 3, 2, 2, 2, 2, 1, 1]):
    ...     es = es.update(loss)
    ...     if es.should_stop:
    ...         print('stop at epoch', epoch)
    ...         break
    stop at epoch 7
    """
    min_delta: float = 0
    patience: int = 0
    best_metric: float = float("inf")
    patience_count: int = 0
    should_stop: bool = False
    has_improved: bool = False

    def reset(self):
        """The state with the best metric and counters cleared (settings kept)."""
        return self.replace(best_metric=float("inf"), patience_count=0, should_stop=False,
                            has_improved=False)

    def update(self, metric):
        """The state after observing ``metric``."""
        if math.isinf(self.best_metric) or self.best_metric - metric > self.min_delta:
            return self.replace(best_metric=metric, patience_count=0, has_improved=True)
        should_stop = self.patience_count >= self.patience or self.should_stop
        return self.replace(patience_count=self.patience_count + 1, should_stop=should_stop,
                            has_improved=False)
