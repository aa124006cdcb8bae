"""``jax.experimental.compilation_cache.compilation_cache``: the persistent compilation
cache's directory (``jax_compilation_cache_dir``; see docs/architecture.md)."""
from xform.core.config import config
from xform.interpreters import compiler


def set_cache_dir(path) -> None:
    """Compiled programs are written to and read from ``path`` from now on. The cache is
    trusted: anyone who can write there can make this process run their code."""
    config.update("jax_compilation_cache_dir", path)


def reset_cache() -> None:
    """Forget the programs compiled in this process (the directory is left alone)."""
    compiler.clear_caches()
