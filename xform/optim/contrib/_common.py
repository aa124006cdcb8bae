"""Helpers the contributed optimizers share (kept private to this package)."""


def value_or_schedule(v, count):
    """``v(count)`` for a schedule, ``v`` itself for a constant."""
    return v(count) if callable(v) else v
