"""The bundled PARAM DLRM on 8 V100: read off its execution traces, predicted end to end."""
import importlib.util
import json

import pytest
from paths import ROOT, SCENARIOS

from predictors.engine.predict import predict
from predictors.scenario.format import load_scenario

SCENARIO = SCENARIOS / "param_dlrm_8xv100.json"
TRACES = ROOT.parent / "shared" / "data" / "traces" / "param-dlrm-v100-8rank"


def _benchmark():
    spec = importlib.util.spec_from_file_location(
        "param_dlrm_v100", ROOT / "benchmarks" / "param_dlrm_v100.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_scenario_is_the_torchrec_dlrm_with_adagrad_and_fused_lookups():
    doc = load_scenario(SCENARIO)
    assert doc["platform"] == {"preset": "dgx1-v100"}
    assert doc["training"]["optimizer"] == "adagrad" and doc["training"]["batch_size"] == 128
    tables = next(n for n in doc["model"]["nodes"] if n["kind"] == "embedding_tables")
    assert tables["params"]["kernel"] == "fused" and len(tables["params"]["tables"]) == 26
    ranks = doc["parallelism"]["embedding_sharding"].values()
    assert sum(r == "dp" for r in ranks) == 2
    assert sorted({r["rank"] for r in ranks if r != "dp"}) == list(range(8))


def test_it_predicts_every_rank():
    result = predict(load_scenario(SCENARIO))
    assert len(result.per_rank) == 8 and result.iteration_ms > 0
    assert any(n.startswith("host: ") for n in result.notes)


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data/traces/param-dlrm-v100-8rank "
                                                "is absent")
def test_the_scenario_is_what_the_execution_traces_say():
    bench = _benchmark()
    assert bench.scenario_from_et(TRACES) == json.loads(SCENARIO.read_text())
    steps = bench.recorded(TRACES)
    assert [round(s["ms"], 1) for s in steps] == [14.5, 19.9, 13.0, 19.3, 18.0, 17.8, 13.1, 12.5]
    # the ranks end together; they start apart
    assert max(s["end_ms"] for s in steps) - min(s["end_ms"] for s in steps) < 1.0


def test_table_assignment_needs_one_set_per_rank():
    bench = _benchmark()
    facts = [{"pooling": [1, 1, 1], "dp_width": 4, "dp_tables": 1, "dp_rows": [],
              "tbe_width": 4, "tbe_rows": 4 * 5, "tbe_lookups": 1}]
    with pytest.raises(ValueError, match="rank 0: 2 sets"):
        bench.assign_tables(facts, rows=(5, 5, 7))
