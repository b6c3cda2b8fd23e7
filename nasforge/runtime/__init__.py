"""The process a trial runs in: its devices (:mod:`~nasforge.runtime.devices`), its threads
(:mod:`~nasforge.runtime.threads`), the weights it saves (:mod:`~nasforge.runtime.weights`),
keeping its sockets on this machine (:mod:`~nasforge.runtime.loopback`), starting a local
group of ranks (:mod:`~nasforge.runtime.procgroup`), data parallelism across ranks
(:mod:`~nasforge.runtime.distributed`) and batch norm over the whole batch of its ranks
(:mod:`~nasforge.runtime.sync_bn`, shared by the one-shot and once-for-all families).

A floor below the run record: it imports only :mod:`nasforge.errors`, so every family and the
record itself may use it.
"""

__all__: list[str] = []
