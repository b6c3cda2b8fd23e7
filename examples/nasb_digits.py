"""A one-shot run file: NASB (binary gated mixed ops) on the DARTS/NASP cell space, real digits.

Run:  nasforge run examples/nasb_digits.py --dir runs/nasb

One search epoch keeps it to seconds on a CPU; the measured results in docs/oneshot.md use
8 epochs (``"epochs": 8``). The run writes the same record as every kind of run, so
``nasforge status | export | plot | resume runs/nasb`` work on it.
"""

from nasforge.spaces import digits_cell_space

__all__ = ["data", "space", "strategy"]

space = digits_cell_space()  # 1 channel, 8x8 images, 5 cells
data = "digits"  # sklearn's 1,797 real 8x8 digits: train for weights, val for the architecture
strategy = {"name": "nasb", "epochs": 1, "batch_size": 64, "seed": 0}
