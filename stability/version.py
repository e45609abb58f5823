"""The package version: the one place it is written (pyproject.toml and ``stability.__version__``
read it from here)."""

__version__ = "0.1.0"
