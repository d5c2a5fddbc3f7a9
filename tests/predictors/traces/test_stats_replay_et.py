"""Overhead statistics, replay and execution-trace linking on synthetic and own traces."""
from pathlib import Path

import pytest
from synth import new_format, write

from predictors.profiles import OverheadTable
from predictors.traces import load_recording
from predictors.traces.et import link_et, read_et
from predictors.traces.kineto import TraceError
from predictors.traces.overheads import overhead_stats
from predictors.traces.replay import replay

DATA = Path(__file__).parent / "data"


def test_overheads_of_a_known_trace(tmp_path):
    rec = load_recording([write(tmp_path / "t.json", new_format(step_us=(1000, 1000)))])
    st = overhead_stats(rec.traces, rec.ops)
    assert isinstance(st.overheads, OverheadTable)
    mm = st.overheads.per_op["aten::mm"]
    # op at step+10 for 30 us, launch at +5 for 4 us: T2 5 us, T4 4 us, T3 21 us.
    assert (mm.t2, mm.t4, mm.t3, mm.n) == pytest.approx((5e-6, 4e-6, 21e-6, 2))
    ar = st.overheads.per_op["c10d::allreduce_"]
    assert ar.t1 == pytest.approx(20e-6)  # 50 us after the mm started, mm took 30 us
    assert st.launch_map["aten::mm"] == ["ampere_sgemm_128x64_nn"]
    assert st.launch_latency_us == pytest.approx(2.0)
    assert OverheadTable.from_json(st.overheads.to_json()).per_op["aten::mm"] == mm


def test_replay_of_a_known_trace_is_exact(tmp_path):
    # One step: every op's mean overheads are its own, so the replay is the recording.
    rec = load_recording([write(tmp_path / "t.json", new_format(step_us=(1000,)))])
    r = replay(rec)
    assert r.recorded_ms == pytest.approx(1.0)
    assert abs(r.error_pct) < 1.0
    assert len(r.timeline) > 0 and {l.kind for l in r.timeline.lanes} == {"cpu", "stream"}
    two = replay(load_recording([write(tmp_path / "t2.json", new_format(step_us=(400, 400)))]))
    assert len(two.per_rank[0]["steps"]) == 2 and abs(two.error_pct) < 25


def test_replay_syncs_ranks_at_collectives(tmp_path):
    # Rank 1 enters its step 300 us late: rank 0's all-reduce must wait for it.
    a = new_format(rank=0, step_us=(1000,))
    b = new_format(rank=1, step_us=(1000,))
    for e in b["traceEvents"]:
        if "ts" in e and isinstance(e["ts"], (int, float)) and e.get("pid") != "Spans":
            e["ts"] += 300
    rec = load_recording([write(tmp_path / "r0.json", a), write(tmp_path / "r1.json", b)])
    r = replay(rec)
    ev0 = r.timeline
    comm = [i for i in range(len(ev0)) if ev0.names[ev0.name_id[i]].startswith("nccl")]
    ends = sorted(float(ev0.start_us[i] + ev0.dur_us[i]) for i in comm)
    assert ends[1] - ends[0] < 1e-6  # both ranks finish the collective together


def test_chakra_et_links_by_record_function_id():
    et = read_et(DATA / "tiny_cpu_chakra_et.json.gz")
    assert et.schema.startswith("1.1.") and len(et.nodes) > 100
    link = link_et(et, load_recording([DATA / "tiny_cpu_kineto.json.gz"]).traces[0])
    assert link.method == "rf_id=Record function id" and link.coverage > 0.9


def test_et_sequence_alignment_fallback():
    et = read_et(DATA / "tiny_cpu_chakra_et.json.gz")
    tr = load_recording([DATA / "tiny_cpu_kineto.json.gz"]).traces[0]
    tr.rf[:] = -1
    tr.ext[:] = -1  # an old Kineto trace: no ids to match on
    link = link_et(et, tr)
    assert link.method == "sequence alignment" and link.coverage > 0.9
    for node in et.ops():
        if node.id in link.pairs:
            assert tr.names[tr.name_id[link.pairs[node.id]]] == node.name


def test_bad_et(tmp_path):
    p = tmp_path / "et.json"
    p.write_text('{"schema": "9.9", "nodes": []}')
    with pytest.raises(TraceError, match="^et.json: schema"):
        read_et(p)
    p.write_text('{"schema": "1.0.1", "nodes": [{"name": "x"}]}')
    with pytest.raises(TraceError, match="^et.json: node 0"):
        read_et(p)


def test_replay_refuses_a_step_it_cannot_replay(tmp_path):
    kernels_only = new_format(step_us=(1000,))
    kernels_only["traceEvents"] = [e for e in kernels_only["traceEvents"]
                                   if e.get("cat") in ("kernel", "user_annotation")]
    rec = load_recording([write(tmp_path / "k.json", kernels_only)])
    with pytest.raises(TraceError, match=r"^k.json: no CPU ops in the recorded step window"):
        replay(rec)
    zero = new_format(step_us=(1000,))
    zero["traceEvents"][0]["dur"] = 0  # ProfilerStep#0 lasting no time
    with pytest.raises(TraceError, match="zero duration|no CPU ops"):
        replay(load_recording([write(tmp_path / "z.json", zero)]))


def test_collective_sizes_survive_odd_execution_trace_nodes(tmp_path):
    import json

    from predictors.calibrate.trace_validation import collective_sizes_from_et

    nodes = [{"id": None, "name": "record_param_comms", "inputs": 5},
             {"id": "7", "name": "record_param_comms", "inputs": ["allreduce"],
              "outputs": "x"},
             {"id": 3, "name": "record_param_comms",
              "inputs": [[1, 2, 0, 1024, 4, "cuda:0"], "allreduce"]}]
    path = tmp_path / "et_rank0.json"
    path.write_text(json.dumps({"schema": "1.0.1", "nodes": nodes}))
    sizes = collective_sizes_from_et([str(path)])
    assert sizes[0][-1] == ("all_reduce", 4096.0)
