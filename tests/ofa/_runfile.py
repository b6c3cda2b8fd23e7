"""Test helper: a tiny CompOFA run file (``kind: ofa``) and its data, for end-to-end runs.

ofa_run_file(tmp_path, search)   writes ``data.pt`` (120 random 28x28 images, a label
                                 from their mean's sign) and ``ofa.yaml`` (width 0.25,
                                 one epoch per phase, one sub-network a step) whose
                                 ``search:`` line is ``search``; returns the yaml's path
"""

from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["ofa_run_file"]


def ofa_run_file(tmp_path: Path, search: str) -> Path:
    """Returns the path of a tiny ``kind: ofa`` run file beside its ``data.pt``."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(120, 1, 28, 28, generator=g)
    torch.save({"x": x, "y": (x.mean(dim=(1, 2, 3)) > 0).long()}, tmp_path / "data.pt")
    f = tmp_path / "ofa.yaml"
    f.write_text(
        "kind: ofa\nspace: compofa\ndata: data.pt\nwidth_mult: 0.25\nfull_epochs: 1\n"
        f"shrink_epochs: 1\nn_subnets: 1\nbatch_size: 60\nthreads: 1\nsearch: {search}\n"
    )
    return f
