"""Headless predictor core: scenarios -> captured op graphs -> simulated timelines.

The public API::

    from predictors import load_scenario, predict
    prediction = predict(load_scenario("resources/scenarios/small_dlrm.json"))
    print(prediction.iteration_ms)

``predict`` takes ``progress(fraction, stage)`` and ``cancelled()`` callbacks; it raises
:class:`ScenarioError` (naming the field) for an invalid scenario and :class:`Cancelled`
when asked to stop.  This package never imports Qt; the GUI lives in :mod:`explorer`.
"""
import os

# Kineto (torch 2.13) prints two "USDT: ... profiler_start/stop" lines on stderr for every
# profiled span: hundreds per calibration, drowning its progress lines.  Level 6 is above
# all of Kineto's levels; set KINETO_LOG_LEVEL yourself to see its messages again.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

from .engine.predict import Prediction, predict  # noqa: E402
from .scenario import ScenarioError, load_scenario  # noqa: E402
from .utils.progress import Cancelled  # noqa: E402

__version__ = "0.1.0"
__all__ = ["predict", "load_scenario", "Prediction", "ScenarioError", "Cancelled"]
