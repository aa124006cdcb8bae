"""A background-thread prefetching iterator (``flax.training.prefetch_iterator``,
deprecated there in favour of the data pipeline's own prefetch)."""
import threading
import warnings

__all__ = ["PrefetchIterator"]


class PrefetchIterator:
    """Wraps ``data_iter`` and reads up to ``buffer_size`` items ahead in a thread.

    An exception raised by ``data_iter`` is re-raised by ``next`` once the buffered
    items are consumed.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore', DeprecationWarning)
    ...     it = PrefetchIterator(iter(range(3)))
    >>> list(it)
    [0, 1, 2]
    """

    def __init__(self, data_iter, buffer_size=1):
        warnings.warn("PrefetchIterator is deprecated. Use the standard `tf.data` prefetch "
                      "method instead", DeprecationWarning)
        self._data_iter = data_iter
        self.buffer_size = buffer_size
        self._cond = threading.Condition()
        self._buffer = []
        self._active = True
        self._error = None
        self._thread = threading.Thread(target=self._prefetch_loop, daemon=True)
        self._thread.start()

    def __iter__(self):
        return self

    def __next__(self):
        with self._cond:
            self._cond.wait_for(lambda: self._buffer or not self._active)
            if self._buffer:
                item = self._buffer.pop(0)
                self._cond.notify_all()
                return item
            if self._error:
                raise self._error
            raise StopIteration()

    def close(self):
        """Stops the prefetching thread."""
        with self._cond:
            self._active = False
            self._cond.notify_all()

    def _prefetch_loop(self):
        while True:
            try:
                item = next(self._data_iter)
            except Exception as e:  # noqa: BLE001  (handed to the consumer; StopIteration too)
                with self._cond:
                    self._error = None if isinstance(e, StopIteration) else e
                    self._active = False
                    self._cond.notify_all()
                return
            with self._cond:
                self._buffer.append(item)
                self._cond.notify_all()
                self._cond.wait_for(lambda: len(self._buffer) < self.buffer_size
                                    or not self._active)
                if not self._active:
                    return
