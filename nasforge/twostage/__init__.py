"""Two-stage search: a cheap first stage (a one-shot supernet, a proxy, a trivial rule)
proposes a shortlist, the multi-trial engine trains it under a multi-fidelity rule and picks
by validation (the ``two-stage`` kind of run; docs/oneshot.md, "Finding the best architecture
within a budget"). It composes the one-shot and multi-trial families, so it sits above them,
as the command line does.
"""

from nasforge.twostage.propose import get_proposer
from nasforge.twostage.runner import TwoStageSearch
from nasforge.twostage.shortlist import ShortlistSettings, choose

__all__ = ["TwoStageSearch", "ShortlistSettings", "choose", "get_proposer"]
