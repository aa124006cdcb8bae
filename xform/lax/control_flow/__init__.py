"""Structured control flow as higher-order primitives (cond, while, scan, ...)."""
