"""A local Ray for the tests (not a test module): started as the Ray executor starts its own,
bound to 127.0.0.1 in a private folder, and shut down leaving no process behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from nasforge.engine.ray_executor import _LOCAL_INIT, _loopback_node
from nasforge.runtime.loopback import pids_marked
from tests.runwait import wait_until

__all__ = ["loopback_ray"]


@contextlib.contextmanager
def loopback_ray(**init_kwargs: Any) -> Iterator[str]:
    """Returns (as a context) the private folder (``RAY_TMPDIR``) of a local Ray started with
    ``init_kwargs`` (e.g. ``num_cpus``) whose servers listen on 127.0.0.1 only, as
    :class:`~nasforge.engine.ray_executor.RayExecutor` starts one of its own; Ray's ``ray.init()``
    alone would listen on every interface. On exit Ray is shut down, and no process of it may
    be left (any straggler is killed, then the check fails)."""
    ray = pytest.importorskip("ray", reason="the Ray executor needs the extra nasforge[ray]")
    folder = tempfile.mkdtemp(prefix="nfr-", dir="/tmp")  # short: Ray's socket path limit
    with pytest.MonkeyPatch.context() as env:
        env.delenv("RAY_ADDRESS", raising=False)
        env.setenv("RAY_TMPDIR", folder)  # no other Ray of this machine is found or joined
        kwargs = {**_LOCAL_INIT, "log_to_driver": False, **init_kwargs}
        with _loopback_node(ray, kwargs["_node_ip_address"]):
            ray.init(**kwargs)
        try:
            yield folder
        finally:
            ray.shutdown()
            gone = wait_until(lambda: not pids_marked(folder), 60.0, poll=0.2)
            for pid in pids_marked(folder):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            shutil.rmtree(folder, ignore_errors=True)
    assert gone, "processes of the test's Ray outlived its shutdown"
