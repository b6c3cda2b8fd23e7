"""Test helpers: the processes a Ray instance started and the addresses they listen on (the
library's own scan, :mod:`nasforge.runtime.loopback`, which a local Ray cluster uses too)."""

from __future__ import annotations

from nasforge.runtime.loopback import listening_addresses as listening
from nasforge.runtime.loopback import pids_marked

__all__ = ["listening", "pids_marked"]
