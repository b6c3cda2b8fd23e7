"""Tests of the median stopping rule."""

import pytest

from nasforge.errors import ConfigError
from nasforge.strategy import MedianStopper, should_stop


def test_poor_trial_is_stopped_good_one_is_not():
    """A curve below the median of finished running averages stops; one above goes on."""
    st = MedianStopper(warmup_steps=1, min_trials=3)
    for curve in ([0.5, 0.6, 0.7], [0.6, 0.7, 0.8], [0.4, 0.5, 0.6]):
        st.add_finished(curve)
    snap = st.snapshot()
    assert should_stop(snap, [0.1, 0.2])
    assert not should_stop(snap, [0.6, 0.9])


def test_warmup_and_min_trials_are_respected():
    """No stop before warmup_steps, nor while fewer than min_trials finished curves exist."""
    st = MedianStopper(warmup_steps=2, min_trials=2)
    st.add_finished([1.0, 1.0, 1.0])
    assert not should_stop(st.snapshot(), [0.0, 0.0, 0.0])
    st.add_finished([1.0, 1.0, 1.0])
    assert not should_stop(st.snapshot(), [0.0, 0.0])
    assert should_stop(st.snapshot(), [0.0, 0.0, 0.0])


def test_no_snapshot_never_stops():
    """Without a stopper nothing stops."""
    assert not should_stop(None, [0.0])


def test_bad_arguments():
    """Negative warmup is a ConfigError naming the value."""
    with pytest.raises(ConfigError, match="-1"):
        MedianStopper(warmup_steps=-1)


@pytest.mark.parametrize("rule", ["median", "sh", "asha", "hyperband"])
def test_every_registered_rule_keeps_the_stopper_contract(rule):
    """Each rule: registered, config round-trips through get_stopper, snapshots pickle as
    plain data, reset forgets everything, and an empty curve never stops."""
    import pickle

    from nasforge.strategy import get_stopper, list_stoppers

    assert rule in list_stoppers()
    stopper = get_stopper(rule)
    assert get_stopper(stopper.config()).config() == stopper.config()
    fresh = stopper.snapshot(1)
    for i in range(1, 8):
        stopper.add_finished([float(i)] * 9, i, "done")
    snap = stopper.snapshot(1)
    assert pickle.loads(pickle.dumps(snap)) == snap
    assert snap is None or snap.get("rule", "median") in list_stoppers()
    assert not should_stop(snap, [])
    stopper.reset()
    assert stopper.snapshot(1) == fresh


def test_a_misspelt_rule_gets_a_did_you_mean_and_a_bad_key_lists_the_valid_keys():
    """`stopper: ashaa` suggests asha; a key the rule does not take names the rule's keys,
    not Python's raw TypeError."""
    from nasforge.errors import ConfigError
    from nasforge.strategy.stopping import get_stopper

    with pytest.raises(ConfigError, match="did you mean 'asha'"):
        get_stopper("ashaa")
    with pytest.raises(ConfigError, match=r"'etaa'.*valid keys.*eta") as info:
        get_stopper({"rule": "asha", "etaa": 3})
    assert "__init__()" not in str(info.value)
