"""End to end on the public traces in ../shared/data/traces (skipped where absent)."""
import gzip
import json
from pathlib import Path

import orjson
import pytest

from predictors.cli.commands import main
from predictors.traces import load_recording
from predictors.traces.et import link_et, read_et
from predictors.traces.replay import replay

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "traces"
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/traces is absent "
                                "(a fresh clone has no shared data)")
DLRM = sorted((SHARED / "param-dlrm-v100-8rank").glob("worker*_step_12.*.pt.trace.json.gz"))
SINGLE = sorted(p for p in SHARED.glob("*/*.gz")
                if "param-dlrm" not in str(p) and "_et." not in p.name)


def recorded_steps(path):
    """ProfilerStep spans read straight from the file (CPU side, deduplicated)."""
    ev = orjson.loads(gzip.open(path).read())["traceEvents"]
    return sorted({(e["name"], float(e["dur"])) for e in ev if e.get("ph") == "X"
                   and str(e.get("name", "")).startswith("ProfilerStep#")
                   and e.get("cat") in ("user_annotation", "Operator", "cpu_op")},
                  key=lambda x: int(x[0].split("#")[1]))


@pytest.mark.parametrize("path", SINGLE, ids=lambda p: p.parent.name + "/" + p.name[:24])
def test_every_trace_loads_with_its_step_times(path):
    rec = load_recording([path])
    tl = rec.timeline
    assert len(tl) > 0 and tl.lanes_of(0, "stream")
    expected = recorded_steps(path)
    assert [s.name for s in tl.steps] == [n for n, _ in expected]
    assert [s.dur_us for s in tl.steps] == pytest.approx([d for _, d in expected])


def test_dlrm_8_ranks_steps_and_replay():
    rec = load_recording(DLRM)
    assert rec.ranks == list(range(8))
    for tr, path in zip(rec.traces, DLRM):
        steps = [(s.name, s.dur_us) for s in rec.timeline.steps if s.rank == tr.rank]
        assert steps == recorded_steps(path)
    r = replay(rec)
    assert r.recorded_ms == pytest.approx(19.901)
    assert abs(r.error_pct) < 5.0, r.per_rank
    assert all(abs(p["error_pct"]) < 10 for p in r.per_rank)


def test_dlrm_et_links_by_alignment():
    et = read_et(SHARED / "param-dlrm-v100-8rank" / "dlrm_eg_0.json.gz")
    assert et.schema == "1.0.1" and len(et.nodes) == 1675
    link = link_et(et, load_recording(DLRM[:1]).traces[0])
    assert link.method == "sequence alignment" and link.coverage > 0.9


def test_hta_et_links_by_external_id():
    d = SHARED / "hta-a100-single"
    link = link_et(read_et(d / "benchmark_simple_add_et.json.gz"),
                   load_recording([d / "benchmark_simple_add_trace.json.gz"]).traces[0])
    assert link.method == "rf_id=External id" and link.coverage > 0.7


def test_cli_contracts(capsys):
    assert main(["trace-summary", *map(str, DLRM), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["per_rank"]) == 8
    r1 = out["per_rank"][1]
    assert set(r1) >= {"rank", "file", "steps", "device_active_ms", "kernels", "comm_kernels"}
    assert r1["steps"][0]["name"] == "ProfilerStep#10"
    assert r1["steps"][0]["dur_ms"] == pytest.approx(19.901)
    assert r1["steps"][0]["start_us"] == pytest.approx(1694128201421205)
    assert r1["comm_kernels"] == 8 and r1["kernels"] > 100
    hta = SHARED / "hta-a100-ddp-2rank" / "rank0.json.gz"
    assert main(["replay", str(hta), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"iteration_ms", "recorded_ms", "per_rank"}
    assert abs(out["iteration_ms"] / out["recorded_ms"] - 1) < 0.05
