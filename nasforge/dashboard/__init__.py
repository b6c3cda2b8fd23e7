"""A local web dashboard over run records (``nasforge serve DIR ...``; extra ``dashboard``).

It reads the one run record (:mod:`nasforge.run.store`) read-only and never asks which kind
of run wrote it. Modules: :mod:`~nasforge.dashboard.runs` (which directories are served, and
the path check), :mod:`~nasforge.dashboard.data` and :mod:`~nasforge.dashboard.series` (the
data access layer), :mod:`~nasforge.dashboard.importance` (decision importance),
:mod:`~nasforge.dashboard.charts` (figures), :mod:`~nasforge.dashboard.layout` (pages),
:mod:`~nasforge.dashboard.callbacks` (what fills them), :mod:`~nasforge.dashboard.app` (the
Dash app and its server), :mod:`~nasforge.dashboard.auth` (the token asked beyond 127.0.0.1),
:mod:`~nasforge.dashboard.cli` (the command).

Importing this package imports no web framework.
"""

__all__: list[str] = []
