"""``xform.nn.kw_only_dataclasses``: Flax's keyword-only dataclass helpers. Python 3.10+
has them natively, so these are the standard library's ``dataclass``, ``field`` and
``KW_ONLY`` (Module subclasses take ``kw_only=True`` directly)."""
from dataclasses import KW_ONLY, dataclass, field  # noqa: F401

__all__ = ["KW_ONLY", "dataclass", "field"]
