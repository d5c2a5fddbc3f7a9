"""One error metric: geomean |error| with a floor, reported beside the mean and the worst."""
import math

import numpy as np
import pytest

from predictors.utils.metrics import (ERROR_FLOOR, format_summary, geomean_abs, gmae,
                                      relative_errors, summarize)


def test_gmae_is_the_geometric_mean_of_absolute_relative_errors():
    pred, meas = [1.1, 0.8, 2.0], [1.0, 1.0, 1.0]
    assert gmae(pred, meas) == pytest.approx((0.1 * 0.2 * 1.0) ** (1 / 3))


def test_an_exact_prediction_counts_as_the_floor_not_zero():
    assert gmae([1.0, 1.5], [1.0, 1.0]) == pytest.approx(math.sqrt(ERROR_FLOOR * 0.5))
    assert geomean_abs([]) != geomean_abs([])  # NaN when there is nothing to average


def test_pairs_without_a_positive_measurement_are_left_out():
    errs = relative_errors([1.0, 2.0, 3.0], [0.0, 1.0, -1.0])
    assert errs.tolist() == [1.0]


def test_summary_keeps_the_worst_errors_sign_and_prints_all_three():
    s = summarize([0.05, -0.47, 0.02, None])
    assert s.n == 3 and s.worst == -0.47
    assert s.mean == pytest.approx(np.mean([0.05, 0.47, 0.02]))
    assert s.geomean == pytest.approx((0.05 * 0.47 * 0.02) ** (1 / 3))  # 7.8 %: the tail hidden
    text = format_summary(s)
    assert text == "geomean 7.8 %, mean 18.0 %, worst -47.0 % (3 cases)"
    assert format_summary(summarize([])) == "no cases"
