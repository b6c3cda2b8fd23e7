"""A two-stage run file: FairNAS shortlists 4 architectures of the benchmark cell space within a
parameter budget (its best 2, and the largest 2 of the rest), then the engine trains all 4 on
real digits (stage 2's default: no stopper), trains the best 2 again from another seed
(``confirm``, default 2) and picks the better mean validation accuracy.

Run:  nasforge run examples/two_stage_digits.py --dir runs/two-stage
      nasforge status runs/two-stage      # the shortlist, stage 1's scores beside stage 2's

Two supernet epochs and three training epochs keep it to a minute on a CPU; a real search
trains the supernet longer (``epochs``), scores more (``pool``) and shortlists more (``k``).
The run writes one record for both stages, so ``nasforge status | export | resume`` work on
it, and a kill in either stage resumes where it stopped.
"""

from nasforge.spaces.bench_cell import BenchCellSpace

__all__ = ["config", "data", "evaluator", "space", "strategy"]

space = BenchCellSpace(channels=4)  # 4^6 cells; equal functions are shortlisted once
data = "digits"  # stage 1: sklearn's 8x8 digits, train for weights, val for the scores
evaluator = {"type": "classification", "data": "digits", "epochs": 3, "lr": 0.01}  # stage 2
strategy = {
    "name": "two-stage",
    "shortlist": {
        "algorithm": "fairnas",  # the default; or spos, darts, nasb, fewshot, a proxy (synflow),
        # params, flops, random
        "k": 4,  # trained in stage 2: the supernet's best 2 and the largest 2 (by_size)
        "pool": 16,  # architectures stage 1 scores
        "budget": {"params": 4000},  # none over it is shortlisted
        "epochs": 2,  # the one-shot search's own settings from here on
        "cycles": 8,
        "population": 4,
        "selection": "loss",
    },
    # stage 2 trains the whole shortlist by default; with many trials at once a multi-fidelity
    # stopper saves epochs: "stopper": {"rule": "asha", "min_resource": 1, "eta": 2}
    "confirm": 2,  # the default: the best 2 train again from another seed ("confirm": 0: not)
}
config = {"executor": "pool", "concurrency": 2}
