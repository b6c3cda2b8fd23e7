"""Kendall's tau against a reference, and the sentence beside a one-shot score."""

import random

import pytest
from scipy import stats

from nasforge.run.agreement import agreement_text, kendall_tau, size_agreement


def test_kendall_tau_is_scipy_s_tau_b_with_ties() -> None:
    """On lists with ties in either or both, tau-b equals scipy's."""
    rng = random.Random(3)
    for _ in range(30):
        n = rng.randint(2, 25)
        a = [rng.randint(0, 5) for _ in range(n)]
        b = [rng.randint(0, 5) + 0.5 * x for x in a]
        want = stats.kendalltau(a, b).statistic
        got = kendall_tau(a, b)
        if want != want:  # NaN: a constant list
            assert got is None
        else:
            assert got == pytest.approx(want)


def test_kendall_tau_edges() -> None:
    """One list, its reverse, a constant, too short, and unequal lengths."""
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert kendall_tau([1, 1, 1], [1, 2, 3]) is None
    assert kendall_tau([1], [1]) is None
    with pytest.raises(ValueError, match="one length"):
        kendall_tau([1, 2], [1])


def test_the_sentence_says_what_the_scores_add_beyond_size() -> None:
    """A score that ranks as size does adds little; one that does not, says so; none, why."""
    sizes = {"params": [1, 2, 3, 4], "flops": [4, 3, 2, 1]}
    same = size_agreement([0.1, 0.2, 0.3, 0.4], sizes)
    assert same["tau"] == {"params": 1.0, "flops": -1.0} and same["candidates"] == 4
    text = agreement_text(same)
    assert text.startswith("the supernet agrees with parameter count at τ 1.00")
    assert text.endswith("its ranking adds little beyond size")
    other = agreement_text(size_agreement([0.3, 0.1, 0.4, 0.2], {"params": [1, 2, 3, 4]}))
    assert "its ranking is not size's" in other
    assert "too few" in agreement_text(size_agreement([0.5], {"params": [1]}))
    # a non-finite score (a proxy's -inf) is left out, not ranked
    assert size_agreement([float("-inf"), 1, 2], {"params": [9, 1, 2]})["candidates"] == 2
