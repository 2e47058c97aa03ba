"""The library's version (one place; ``vcmc.__version__`` re-exports it)."""

__version__ = "0.1.0"
