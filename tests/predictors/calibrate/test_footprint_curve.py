"""The calibration's step-footprint curve: steps predicted by models that never saw them."""
import numpy as np
import pytest
from cpu_scenarios import small_cpu_dlrm as dlrm
from paths import ROOT

from predictors.calibrate.calibrate import footprint_curve
from predictors.calibrate.profiling import StepProfile
from predictors.costs.learned_models import fit_class_model
from predictors.costs.op_costs import cost_op_graph
from predictors.costs.op_features import model_class
from predictors.hardware.platforms import resolve_platform
from predictors.model.capture import capture_scenario
from predictors.model.footprint import step_footprint
from predictors.profiles import load_profile

CPU = ROOT / "resources" / "profiles" / "cpu" / "local-cpu-1t.json"


def synthetic_step(doc: dict, speed: float, dur: float = 1.0,
                   gap: float = 1.0) -> StepProfile:
    """A profiled step whose ops take the bundled profile's times (kernels x ``dur``,
    gaps x ``gap``), and whose whole step takes ``speed`` times their sum (as if its
    data stayed cached)."""
    graph = capture_scenario(doc, gpu=False)
    truth = cost_op_graph(graph, resolve_platform(doc["platform"]), load_profile(CPU))
    records = [{"node": graph.nodes[op.index], "dur_us": dur * op.kernel_s * 1e6,
                "gap_us": gap * op.overheads.t1 * 1e6} for op in truth.ops
               if op.category != "view"]
    total = sum(r["dur_us"] + r["gap_us"] for r in records)
    return StepProfile(doc["name"], 1, speed * total, speed * total, 0.0, records,
                       graph=graph)


def curve_of(batches, steps=None):
    """The footprint curve of synthetic steps ``[(batch, speed), ...]`` (or of
    ``steps``), with class models fitted on their ops (as the calibration's are, before
    the curve)."""
    steps = steps or [synthetic_step(dlrm(b), s) for b, s in batches]
    samples = {}
    for step in steps:
        for r in step.records:
            cls = model_class(r["node"])
            if cls:
                samples.setdefault(cls, []).append((r["node"], r["dur_us"] / 1e3))
    in_step = {cls: len(rows) for cls, rows in samples.items()}
    spec = load_profile(CPU).device
    models = {cls: fit_class_model(cls, [n for n, _ in rows],
                                   np.array([ms for _, ms in rows]), spec, holdout=0.0,
                                   kinds=("gbm",))
              for cls, rows in samples.items() if len(rows) >= 8}
    curve, figures = footprint_curve(steps, samples, in_step, models, spec)
    return curve, figures, steps


@pytest.mark.slow
def test_the_curve_finds_the_steps_that_run_faster_than_their_ops_say():
    # The same ops (so the same fold models and predictions) in steps that take their
    # ops' sum, and in steps where the small ones take 0.6 of it (as if their data stayed
    # cached): the curve must move by that factor at the small footprint, and only there.
    shapes = [16, 2048, 32, 4096] * 2
    control, _, steps = curve_of([(b, 1.0) for b in shapes])
    faster, figures, _ = curve_of([(b, 0.6 if b < 100 else 1.0) for b in shapes])
    assert figures["steps"] == 8 and faster.steps == 8
    small, large = step_footprint(steps[0].graph), step_footprint(steps[1].graph)
    assert small < large / 10
    assert faster.at(small) / control.at(small) == pytest.approx(0.6, rel=0.03)
    assert faster.at(large) == control.at(large) == 1.0
    assert all(a <= b for a, b in zip(faster.scale, faster.scale[1:]))
    assert figures["step_gmae_with"] < figures["step_gmae_without"]


def test_too_few_steps_give_no_curve():
    steps = [synthetic_step(dlrm(16), 0.6)]
    curve, figures = footprint_curve(steps, {}, {}, {}, load_profile(CPU).device)
    assert curve is None and figures["steps"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("part", ["dur", "gap"])
def test_no_step_is_predicted_by_models_or_gaps_that_saw_it(part):
    # The two folds (steps 0, 1, 4, 5 and 2, 3, 6, 7) time the same kind of ops 4x
    # apart, and each step takes exactly its ops' sum: predicted from the other fold,
    # every step is 4x off in that part; from its own, it would be right.
    batches = [16, 2048, 24, 3072, 32, 4096, 48, 6144]
    steps = [synthetic_step(dlrm(b), 1.0, **{part: 0.5 if (i // 2) % 2 == 0 else 2.0})
             for i, b in enumerate(batches)]
    _, figures, _ = curve_of(None, steps)
    assert figures["steps"] == 8
    assert figures["step_gmae_without"] > 0.3, figures
