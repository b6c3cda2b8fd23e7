"""Loads every built-in kind of run, so that the runner registry knows them all.

The shared floor (:mod:`nasforge.run`) imports no family; this module sits above both and
imports each family's runner by a fixed name, once. The command line and :func:`nasforge.api`
functions import it; a third-party kind registers itself when its own module is imported.
"""

from __future__ import annotations

import nasforge.engine.experiment  # noqa: F401  multitrial
import nasforge.ofa.runner  # noqa: F401  ofa
import nasforge.oneshot.runner  # noqa: F401  oneshot
import nasforge.parallel.runner  # noqa: F401  pipeline

__all__: list[str] = []
