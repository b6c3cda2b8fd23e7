"""The version of nasforge: the one place it is written.

``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``), ``nasforge.__version__`` and
``nasforge --version`` show it, and every run record stores it (meta ``nasforge_version``).
This module imports nothing, so reading it never imports torch.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.2.0"
