"""Measures per-layer forward/backward/swap time and memory of Table 5-like layers.

Four NLP layer types (a 3x1 conv, a 7x1 separable conv, a 5x1 light (depthwise) conv, 8-head
attention; 32 tokens x 256 features) and four CV types (3x3 conv, 3x3 and 5x5 separable
convs, a dilated 3x3 conv; 16 channels x 28 x 28): smaller than the paper's so that the whole
measurement takes about a minute on one CPU core. Per type and batch size: the median forward
and backward time of several runs; parameter bytes; bytes autograd saves for backward per
sample (counted with ``torch.autograd.graph.saved_tensors_hooks``, parameters excluded);
output bytes per sample; and ``swap_ms``, the time to copy the layer's parameters, gradient and
momentum into preallocated buffers (on a GPU: host to device, from pinned memory).

Writes the table to ``--out`` (default ``benchmarks/data/naspipe_costs_<device>.json``), the
format :func:`nasforge.parallel.costs.load_table` reads. Last line: one JSON object.
``--quick`` (the slow test set's smoke run): batches 1 and 4, 3 runs each, written to a
temporary file unless ``--out`` is given (the shipped tables stay as they are).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn


class _Attention(nn.Module):
    """8-head self-attention over (batch, tokens, features)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.att = nn.MultiheadAttention(dim, 8, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.att(x, x, x, need_weights=False)[0]


class _Seq1d(nn.Module):
    """A conv over tokens: (batch, tokens, features) -> same shape."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x.transpose(1, 2)).transpose(1, 2)


def nlp_layers(h: int) -> list[tuple[str, nn.Module]]:
    """Returns the four NLP layer types at width ``h``."""
    return [
        ("Conv 3x1", _Seq1d(nn.Sequential(nn.Conv1d(h, h, 3, padding=1), nn.ReLU()))),
        (
            "Sep Conv 7x1",
            _Seq1d(
                nn.Sequential(
                    nn.Conv1d(h, h, 7, padding=3, groups=h), nn.Conv1d(h, h, 1), nn.ReLU()
                )
            ),  # fmt: skip
        ),
        ("Light Conv 5x1", _Seq1d(nn.Conv1d(h, h, 5, padding=2, groups=h))),
        ("8 Head Attention", _Attention(h)),
    ]


def cv_layers(c: int) -> list[tuple[str, nn.Module]]:
    """Returns the four CV layer types at ``c`` channels."""

    def sep(k: int, dil: int = 1) -> nn.Module:
        pad = dil * (k - 1) // 2
        return nn.Sequential(
            nn.ReLU(), nn.Conv2d(c, c, k, padding=pad, dilation=dil, groups=c),
            nn.Conv2d(c, c, 1), nn.BatchNorm2d(c),
        )  # fmt: skip

    return [
        ("Conv 3x3", nn.Sequential(nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c))),
        ("Sep Conv 3x3", sep(3)),
        ("Sep Conv 5x5", sep(5)),
        ("Dil Conv 3x3", sep(3, dil=2)),
    ]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    layer: nn.Module, shape: tuple[int, ...], batches: list[int], reps: int, device: torch.device
) -> dict:
    """Returns one table entry (times in ms, sizes in bytes) for ``layer``."""
    layer = layer.to(device)
    fwd, bwd = [], []
    for b in batches:
        x = torch.randn(b, *shape, device=device, requires_grad=True)
        tf, tb = [], []
        for r in range(reps + 1):
            _sync(device)
            t0 = time.perf_counter()
            y = layer(x)
            _sync(device)
            t1 = time.perf_counter()
            y.sum().backward()
            _sync(device)
            t2 = time.perf_counter()
            if r:  # the first run warms up
                tf.append((t1 - t0) * 1e3)
                tb.append((t2 - t1) * 1e3)
        fwd.append(round(statistics.median(tf), 5))
        bwd.append(round(statistics.median(tb), 5))
    params = list(layer.parameters())
    pbytes = sum(p.numel() * p.element_size() for p in params)
    pptrs = {p.data_ptr() for p in params}
    saved: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.data_ptr() not in pptrs:
            saved.append(t.numel() * t.element_size())
        return t

    b = batches[-1]
    x = torch.randn(b, *shape, device=device, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = layer(x)
    # Host-tier -> device-tier copy of the layer's context: parameter, gradient, momentum.
    host = [p.detach().to("cpu").clone() for p in params for _ in range(3)]
    if device.type == "cuda":
        host = [h.pin_memory() for h in host]
    dev = [torch.empty_like(h, device=device) for h in host]
    times = []
    for _ in range(reps + 1):
        _sync(device)
        t0 = time.perf_counter()
        for d, h in zip(dev, host):
            d.copy_(h, non_blocking=True)
        _sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return {
        "batches": batches,
        "fwd_ms": fwd,
        "bwd_ms": bwd,
        "swap_ms": round(statistics.median(times[1:]), 5),
        "param_bytes": pbytes,
        "act_bytes": int(sum(saved) / b),
        "io_bytes": int(y.numel() * y.element_size() / b),
    }


def main(argv: list[str] | None = None) -> int:
    """Measures every layer type; writes the table; prints the JSON line last."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="batches 1 and 4, 3 runs, a temp file")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches, args.reps = [1, 4], 3
        if args.out is None:
            with tempfile.TemporaryDirectory() as tmp:
                return main([*(argv or sys.argv[1:]), "--out", str(Path(tmp) / "costs.json")])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    device = torch.device(args.device)
    name = "gpu" if device.type == "cuda" else "cpu"
    out = Path(args.out or Path(__file__).parent / "data" / f"naspipe_costs_{name}.json")
    t0 = time.time()
    fams = {}
    for fam, layers, shape in (("nlp", nlp_layers(256), (32, 256)),
                               ("cv", cv_layers(16), (16, 28, 28))):  # fmt: skip
        fams[fam] = []
        for lname, layer in layers:
            entry = {"name": lname, **measure(layer, shape, args.batches, args.reps, device)}
            fams[fam].append(entry)
            print(f"{fam} {lname}: fwd {entry['fwd_ms']} bwd {entry['bwd_ms']}", file=sys.stderr)
    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU, 1 thread"
    table = {
        "source": "benchmarks/naspipe_costs.py",
        "device": dev_name,
        "torch": torch.__version__,
        "notes": [
            "NLP: 32 tokens x 256 features; CV: 16 channels x 28 x 28; fp32; median of "
            f"{args.reps} runs after one warm-up; swap_ms copies parameter, gradient and "
            "momentum (3 x param_bytes).",
        ],
        "families": fams,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1) + "\n")
    names = {k: [e["name"] for e in v] for k, v in fams.items()}
    seconds = round(time.time() - t0, 1)
    print(json.dumps({"out": str(out), "device": dev_name, "seconds": seconds, "families": names}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
