"""The noise floor's estimators recover a known noise."""
import math

import numpy as np

from predictors.calibrate.noise import (
    class_floor,
    median_shrink,
    pair_floor,
    steps_floor,
)
from predictors.utils.metrics import gmae


def _noisy(rng, truth, sigma, n):
    return truth[:, None] * np.exp(sigma * rng.standard_normal((len(truth), n)))


def test_median_shrink_is_the_median_of_threes_spread():
    assert median_shrink(1) == 1.0
    assert abs(median_shrink(3) - math.sqrt(0.4487)) < 0.01  # normal order statistics


def test_pair_floor_recovers_one_measurements_error():
    rng = np.random.default_rng(1)
    truth = np.exp(rng.uniform(0, 8, 4000))
    m = _noisy(rng, truth, 0.08, 2)
    direct = gmae(m[:, 0], truth)  # what a perfect model would score
    est = pair_floor(list(zip(m[:, 0], m[:, 1])))
    assert abs(est / direct - 1) < 0.1, (est, direct)
    assert pair_floor([(1.0, 1.1)]) is None  # too few pairs to say


def test_steps_floor_recovers_the_median_of_steps_error():
    rng = np.random.default_rng(2)
    truth = np.exp(rng.uniform(0, 8, 4000))
    steps = _noisy(rng, truth, 0.1, 3)
    direct = gmae(np.median(steps, axis=1), truth)
    est = steps_floor([list(s) for s in steps] + [None, [1.0]])  # odd rows are skipped
    assert abs(est / direct - 1) < 0.1, (est, direct)
    assert steps_floor([None]) is None


def test_class_floor_is_the_geomean_over_samples():
    f = class_floor(100, 0.04, 300, 0.09)
    assert abs(f["gmae"] - math.exp(0.25 * math.log(0.04) + 0.75 * math.log(0.09))) < 1e-12
    assert f["samples_isolated"] == 100 and f["gmae_in_context"] == 0.09
    assert class_floor(10, None, 5, 0.1)["gmae"] is None  # a part unmeasured: no total
    assert abs(class_floor(0, None, 5, 0.1)["gmae"] - 0.1) < 1e-12  # no microbenchmarks
