"""Tests of the MLP accuracy predictor."""

from __future__ import annotations

import pytest
from scipy.stats import spearmanr

from nasforge.errors import ConfigError
from nasforge.ofa.predictor import AccuracyPredictor, structured_features
from nasforge.ofa.spaces import OFASearchSpace, OFASpec, small_spec


def test_predictor_ranks_held_out_networks():
    """Trained on 300 (arch, accuracy) pairs of a smooth target, it ranks 100 unseen archs."""
    space = OFASearchSpace(OFASpec())

    def target(a):
        return 0.5 + sum(0.01 * e + 0.003 * k * (b + 1) for b, _, e, k in space.layers(a)) / 10

    archs = [space.sample_dims(i) for i in range(400)]
    pred = AccuracyPredictor(space, seed=0)
    pred.fit(archs[:300], [target(a) for a in archs[:300]], epochs=200)
    rho = spearmanr(pred.predict(archs[300:]), [target(a) for a in archs[300:]]).statistic
    assert rho > 0.9
    again = AccuracyPredictor(space, seed=1)
    again.load_state_dict(pred.state_dict())
    assert again(archs[0]) == pytest.approx(pred(archs[0]))


def test_predictor_needs_pairs():
    """Mismatched or too few pairs raise ConfigError."""
    space = OFASearchSpace(OFASpec(coupling="compofa"))
    with pytest.raises(ConfigError):
        AccuracyPredictor(space).fit([space.largest()], [0.5])


def test_structured_encoding_reads_elastic_resolution():
    """With elastic resolution, the same layers at another side encode differently, and the
    structured ensemble ranks unseen networks of a target that depends on side and layers."""
    space = OFASearchSpace(small_spec("ofa", resolutions=(20, 24, 28)))
    arch = space.sample_dims(0)
    small, large = dict(arch, resolution=20), dict(arch, resolution=28)
    f_small, f_large = structured_features(space, small), structured_features(space, large)
    assert len(f_small) == len(f_large) and f_small != f_large
    assert f_small[-1] < f_large[-1]  # the relative multiply-adds grow with the side

    def target(a):
        depth = sum(1 for _ in space.layers(a))
        return 0.8 + 0.004 * a["resolution"] + 0.001 * depth

    archs = [space.sample_dims(i) for i in range(300)]
    pred = AccuracyPredictor.structured(space, seed=0)
    pred.fit(archs[:200], [target(a) for a in archs[:200]], epochs=150)
    rho = spearmanr(pred.predict(archs[200:]), [target(a) for a in archs[200:]]).statistic
    assert rho > 0.9
