"""The step-footprint curve: its fit, how a prediction applies it, and its profile field."""
import copy
import json
import math

import numpy as np
import pytest
from cpu_scenarios import small_cpu_dlrm as dlrm
from paths import ROOT, SCENARIOS

from predictors.costs.op_costs import cost_op_graph
from predictors.engine.predict import predict
from predictors.hardware.platforms import resolve_platform
from predictors.model.capture import capture_scenario
from predictors.model.footprint import (
    FootprintScale,
    fit_footprint_scale,
    step_footprint,
)
from predictors.profiles import ProfileError, load_profile, save_profile
from predictors.scenario.format import load_scenario

CPU = ROOT / "resources" / "profiles" / "cpu" / "local-cpu-1t.json"
GPU = ROOT / "resources" / "profiles" / "gpu" / "nvidia-h200.json"


def test_the_curve_interpolates_in_log_bytes_and_is_flat_beyond_its_knots():
    curve = FootprintScale((1e6, 1e8), (0.5, 1.0))
    assert curve.at(1e3) == 0.5 and curve.at(1e10) == 1.0
    assert curve.at(1e7) == pytest.approx(0.75)   # halfway in log(bytes)
    assert curve.at(None) == 1.0 and curve.at(0) == 1.0   # unknown footprint
    assert FootprintScale.from_json(json.loads(json.dumps(curve.to_json()))) == curve


@pytest.mark.parametrize("knots,scales,fragment", [
    ((), (), "at least one"),
    ((1e6, 1e5), (0.5, 1.0), "must increase"),
    ((1e6,), (0.0,), "scale"),
    ((1e6,), (1.5,), "scale"),
    ((1e6, 1e7), (0.9, 0.5), "must not decrease"),
    ((-1.0,), (1.0,), "written_bytes"),
    ((1e6, 1e7), (1.0,), "as many"),
])
def test_a_malformed_curve_is_refused(knots, scales, fragment):
    with pytest.raises(ValueError, match=fragment):
        FootprintScale(knots, scales)


def test_the_fit_recovers_a_step_that_runs_faster_below_a_cache_size():
    rng = np.random.default_rng(0)
    written = 10 ** rng.uniform(6, 8.5, 60)
    truth = np.where(written < 1e7, 0.6, 1.0)
    predicted = rng.uniform(1e-3, 5e-2, 60)
    measured = predicted * truth * np.exp(rng.normal(0, 0.03, 60))
    curve = fit_footprint_scale(written, measured, predicted)
    assert curve.steps == 60
    assert all(a <= b for a, b in zip(curve.scale, curve.scale[1:]))   # monotone
    assert curve.at(2e6) == pytest.approx(0.6, rel=0.06)
    assert curve.at(1e8) == pytest.approx(1.0, rel=0.06)
    assert fit_footprint_scale(written[:5], measured[:5], predicted[:5]) is None


def test_the_capture_counts_the_bytes_a_step_writes():
    small = capture_scenario(dlrm(16), gpu=False)
    large = capture_scenario(dlrm(512), gpu=False)
    ages = max(n["input_age_bytes"] for n in small.nodes.values())
    assert step_footprint(small) >= ages > 0
    assert step_footprint(large) > 4 * step_footprint(small)


def test_a_cpu_profile_scales_every_ops_kernel_and_gap(tmp_path):
    doc = dlrm(64)
    graph = capture_scenario(doc, gpu=False)
    platform = resolve_platform(doc["platform"])
    plain = load_profile(CPU)
    assert plain.footprint_scale is None
    scaled = copy.copy(plain)
    scaled.footprint_scale = FootprintScale((1e3, 1e12), (0.5, 0.5))
    a, b = cost_op_graph(graph, platform, plain), cost_op_graph(graph, platform, scaled)
    assert a.footprint_scale == 1.0 and b.footprint_scale == 0.5
    for x, y in zip(a.ops, b.ops):
        assert y.kernel_s == pytest.approx(0.5 * x.kernel_s)
        assert y.overheads.t1 == pytest.approx(0.5 * x.overheads.t1)
    loop = plain.overheads.step_s * 1e3
    p_plain, p_scaled = predict(doc, profile=plain), predict(doc, profile=scaled)
    t_plain, t_scaled = p_plain.iteration_ms, p_scaled.iteration_ms
    assert t_scaled - loop == pytest.approx(0.5 * (t_plain - loop), rel=1e-6)
    # the prediction says why
    assert not any("footprint" in n for n in p_plain.notes)
    assert any("footprint" in n and "0.50x" in n for n in p_scaled.notes)
    # saved and loaded with the profile
    save_profile(scaled, tmp_path / "p.json")
    assert load_profile(tmp_path / "p.json").footprint_scale == scaled.footprint_scale


def test_each_step_gets_the_curve_at_its_own_footprint():
    plain = load_profile(CPU)
    curved = copy.copy(plain)
    curved.footprint_scale = FootprintScale((1e5, 1e9), (0.5, 1.0))
    for batch in (16, 512):
        doc = dlrm(batch)
        graph = capture_scenario(doc, gpu=False)
        platform = resolve_platform(doc["platform"])
        want = curved.footprint_scale.at(step_footprint(graph))
        assert 0.5 < want < 1.0
        a, b = cost_op_graph(graph, platform, plain), cost_op_graph(graph, platform, curved)
        assert b.footprint_scale == pytest.approx(want)
        assert sum(o.kernel_s for o in b.ops) == pytest.approx(
            want * sum(o.kernel_s for o in a.ops))
        # an equal copy of the profile's gap table is the profile's; another table is
        # the caller's own measurement, which the curve was not fitted with
        k = next(i for i, op in enumerate(a.ops) if op.overheads.t1 > 0)
        same = cost_op_graph(graph, platform, curved, copy.deepcopy(plain.overheads))
        assert same.ops[k].overheads.t1 == pytest.approx(want * a.ops[k].overheads.t1)
        other = copy.deepcopy(plain.overheads)
        other.step_s += 1e-3
        own = cost_op_graph(graph, platform, curved, other)
        assert own.ops[k].overheads.t1 == pytest.approx(a.ops[k].overheads.t1)


def test_a_gpu_profiles_ops_are_not_scaled():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    graph = capture_scenario(doc, gpu=True)
    gpu = copy.copy(load_profile(GPU))
    gpu.footprint_scale = FootprintScale((1e3,), (0.5,))
    costed = cost_op_graph(graph, resolve_platform(doc["platform"]), gpu)
    assert costed.footprint_scale == 1.0


@pytest.mark.parametrize("edit", [
    lambda c: c.update(scale=[0.5, -1.0]),
    lambda c: c.update(scale=[0.5, float("nan")]),
    lambda c: c.update(scale=[0.5, 1e300]),
    lambda c: c.update(scale="12"),
    lambda c: c.update(written_bytes=["a", 2e7]),
    lambda c: c.update(written_bytes=[True, 2e7]),
    lambda c: c.pop("scale"),
    lambda c: c.update(steps="x"),
])
def test_a_corrupt_curve_in_a_profile_file_is_a_named_error(tmp_path, edit):
    prof = copy.copy(load_profile(CPU))
    prof.footprint_scale = FootprintScale((1e6, 1e7), (0.5, 1.0))
    path = save_profile(prof, tmp_path / "p.json")
    doc = json.loads(path.read_text())
    edit(doc["footprint_scale"])
    path.write_text(json.dumps(doc))
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(path) in str(info.value) and "footprint_scale" in str(info.value)
    assert math.isfinite(prof.footprint_scale.at(3e6))
