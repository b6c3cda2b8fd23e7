"""The package nasforge.space: its spelled-out __all__ and its lazy names agree."""

import nasforge.space as space


def test_all_lists_exactly_the_lazy_names_and_each_loads() -> None:
    """``__all__`` (spelled out for type checkers) names every lazily loaded name, no more."""
    assert sorted(space.__all__) == sorted(space._EXPORTS)
    for name in space.__all__:
        assert getattr(space, name) is not None
