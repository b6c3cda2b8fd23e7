"""Tests of the stage launcher: loopback-only sockets and failures while starting stages."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from nasforge.errors import ConfigError, WorkerError
from nasforge.parallel.config import RunConfig
from nasforge.parallel.launcher import is_loopback, launch, loopback_interface
from nasforge.parallel.supernet import ChoiceSupernet


def _cfg(**kw) -> RunConfig:
    base = dict(
        space_cls=ChoiceSupernet,
        space_kwargs={"n_blocks": 4, "n_candidates": 3, "hidden": 16},
        steps=32,
        batch_size=8,
        n_stages=2,
        timeout_s=120,
    )
    base.update(kw)
    return RunConfig(**base)


def _listening() -> dict[str, str]:
    """Returns {socket inode: local address} of every listening TCP socket (IPv4 and IPv6)."""
    out = {}
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            hexaddr = fields[1].split(":")[0]
            words = [int(hexaddr[i : i + 8], 16) for i in range(0, len(hexaddr), 8)]
            raw = b"".join(struct.pack("<I", w) for w in words)  # /proc writes host-order words
            out[fields[9]] = socket.inet_ntop(family, raw)
    return out


def _socket_inodes(pid: int) -> set[str]:
    """Returns the inodes of the sockets process ``pid`` holds open."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _addr_is_loopback(addr: str) -> bool:
    if addr.startswith("::ffff:"):  # an IPv4 address in a dual-stack socket
        addr = addr[7:]
    return is_loopback(addr)


@pytest.mark.parametrize(
    "mirror",
    [pytest.param(False, marks=pytest.mark.slow), True],  # the mirror's groups hold the static's
    ids=["static", "mirror"],
)
def test_stage_sockets_listen_on_loopback_only(
    live_stages: Callable[[], list[int]], mirror: bool
) -> None:
    """While a 2-stage run goes (with layer mirroring: also its bundles' own gloo group), no
    socket of the parent or a stage listens off loopback."""
    seen: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            listening = _listening()
            for pid in [os.getpid(), *(p.pid for p in multiprocessing.active_children())]:
                seen.update(listening[i] for i in _socket_inodes(pid) if i in listening)
            done.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        launch(_cfg(steps=16, mirror=mirror))
    finally:
        done.set()
        watcher.join()
    assert seen, "no listening socket observed: the check saw nothing of the run"
    assert all(_addr_is_loopback(a) for a in seen), sorted(seen)
    assert not live_stages()


def test_loopback_helpers() -> None:
    """Loopback names are recognised and the loopback interface is found."""
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.2")
    assert loopback_interface() in os.listdir("/sys/class/net")


def test_unbindable_address_is_a_config_error(live_stages: Callable[[], list[int]]) -> None:
    """A bind address that is not this host's gives a ConfigError before any stage starts."""
    with pytest.raises(ConfigError, match="203.0.113.254"):
        launch(
            _cfg(bind="203.0.113.254")
        )  # TEST-NET-3 (documentation range): not an address of this host
    assert not live_stages()


class _PicklesOnce:
    """Data that pickles for the first stage and fails for the second (a start failure)."""

    count = 0

    def __reduce__(self):
        type(self).count += 1
        if type(self).count > 1:
            raise pickle.PicklingError("cannot pickle this data twice")
        return (tuple, ((np.zeros((8, 64), np.float32), np.zeros(8, np.int64)),))


def test_a_stage_that_cannot_start_ends_the_started_ones(
    live_stages: Callable[[], list[int]],
) -> None:
    """Stage 1 failing to start gives WorkerError (not 'can only join a started process')."""
    _PicklesOnce.count = 0
    with pytest.raises(WorkerError, match="stage 1 could not be started: PicklingError"):
        launch(_cfg(data=_PicklesOnce(), timeout_s=30))
    assert _PicklesOnce.count == 2  # stage 0 did start
    assert not live_stages()
