"""The process a trial runs in: its devices (:mod:`~nasforge.runtime.devices`), its threads
(:mod:`~nasforge.runtime.threads`), the weights it saves (:mod:`~nasforge.runtime.weights`),
keeping its sockets on this machine (:mod:`~nasforge.runtime.loopback`) and starting a local
group of ranks (:mod:`~nasforge.runtime.procgroup`).

A floor below the run record: it imports only :mod:`nasforge.errors`, so every family and the
record itself may use it.
"""

__all__: list[str] = []
