"""The Sharding dock: Run ▸ Rank Shardings in a worker, plans best first, Apply as one undo
step, stale after an edit, errors and cancel."""
import json
import os
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from paths import SCENARIOS

from explorer.sharding.view import COLUMNS
from predictors.scenario.format import load_scenario
from predictors.utils.progress import Cancelled


@pytest.fixture
def dgx_scenario(tmp_path):
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "pcie-4x-a100"}  # 8 tables on 4 GPUs: plans differ
    path = tmp_path / "dlrm_4gpu.json"
    path.write_text(json.dumps(doc))
    return path


def test_ranks_plans_and_applies_one(make_window, qtbot, dgx_scenario, tmp_path):
    w = make_window(dgx_scenario)
    view = w.sharding.view
    with qtbot.waitSignal(w.sharding.runner.sigFinished, timeout=240_000):
        w.sharding.run_action.trigger()
        assert view.cancel_button.isVisible()  # progress and cancel while it runs
    assert not view.cancel_button.isVisible()
    rows = view.table.rowCount()
    assert rows >= 2 and view.table.columnCount() == len(COLUMNS)
    ms = [float(view.table.item(r, 2).text()) for r in range(rows)]
    assert ms == sorted(ms) and view.table.item(0, 3).text() == "best"
    peak = view.table.item(0, COLUMNS.index("Peak memory")).text()
    assert peak.endswith("MB") and "too big" not in peak
    assert view.selected() is view.ranking.plans[0] and len(view._items) == 3
    (memory,) = view._memory_items   # each rank's peak, GB, on the right axis
    peaks = [r["peak_memory_bytes"] / 1e9 for r in view.ranking.plans[0].per_rank]
    assert list(memory.getData()[1]) == pytest.approx(peaks)
    view.grab().save(str(tmp_path / "sharding.png"))
    assert (tmp_path / "sharding.png").stat().st_size > 5_000
    # Apply the second plan: one undo step that writes its assignment
    view.table.selectRow(1)
    chosen = view.selected()
    view.apply_button.click()
    doc = w.editor.document
    assert doc.parallelism()["embedding_sharding"] == chosen.plan.assignment
    assert w.editor.undo_stack.undoText().startswith("Apply sharding plan")
    assert not view.stale and "applied" in view.table.item(1, 1).text()
    w.editor.undo_stack.undo()
    assert doc.parallelism()["embedding_sharding"] == "auto"
    assert "applied" not in view.table.item(1, 1).text()
    # another edit makes the ranking stale, and Apply refuses it; undo makes it fresh
    training = doc.training()
    training["batch_size"] = 2048
    w.editor.set_training(training)
    assert view.stale and not view.apply_button.isEnabled()
    assert not w.sharding.apply(chosen)
    w.editor.undo_stack.undo()
    assert not view.stale


def test_an_edit_during_the_ranking_shows_it_out_of_date(make_window, qtbot, dgx_scenario):
    gate = threading.Event()
    from predictors.plan.rank_sharding import rank_shardings

    def gated(snapshot, **kwargs):
        gate.wait(30)
        return rank_shardings(snapshot, **kwargs)

    w = make_window(dgx_scenario, rank_fn=gated)
    w.sharding.run()
    w.editor.set_platform({"preset": "dgx-a100"})  # while it runs
    with qtbot.waitSignal(w.sharding.runner.sigFinished, timeout=240_000):
        gate.set()
    assert w.sharding.view.stale and not w.sharding.view.apply_button.isEnabled()
    assert not w.sharding.apply(w.sharding.view.ranking.plans[0])
    assert w.editor.document.parallelism()["embedding_sharding"] == "auto"


def test_a_ranking_without_plans_is_said_not_raised(make_window, qtbot, dgx_scenario):
    from predictors.plan.rank_sharding import ShardingRanking
    empty = ShardingRanking("x", "pcie-4x-a100", 4, [], [("greedy by size", "too big")])
    w = make_window(dgx_scenario, rank_fn=lambda snapshot, **kw: empty)
    with qtbot.waitSignal(w.sharding.runner.sigFinished, timeout=30_000):
        w.sharding.run()
    assert w.sharding.view.table.rowCount() == 0
    assert "too big" in w.sharding.view.footer.text()


def test_a_single_gpu_scenario_says_why_it_cannot_be_sharded(make_window, qtbot):
    w = make_window()
    with qtbot.waitSignal(w.sharding.runner.sigFailed, timeout=60_000) as failed:
        w.sharding.run()
    assert "nothing to shard" in failed.args[0]
    assert w.sharding.view.error.isVisible() and w.sharding.view.run_button.isEnabled()
    w.new_scenario()  # another document: the old error goes
    assert not w.sharding.view.error.isVisible()


def test_cancel_stops_the_ranking(make_window, qtbot, dgx_scenario):
    started = threading.Event()

    def slow_rank(snapshot, progress, cancelled, **kwargs):
        started.set()
        while not cancelled():
            threading.Event().wait(0.01)
        raise Cancelled("ranking")

    w = make_window(dgx_scenario, rank_fn=slow_rank)
    w.sharding.run()
    assert started.wait(10)
    with qtbot.waitSignal(w.sharding.runner.sigCancelled, timeout=10_000):
        w.cancel_action.trigger()  # Run ▸ Cancel stops a ranking too
    assert w.sharding.view.run_button.isEnabled()
    assert not w.sharding.runner.is_running()


def test_a_multi_gpu_prediction_shows_every_rank(make_window, qtbot, dgx_scenario):
    w = make_window(dgx_scenario)
    qtbot.waitUntil(lambda: w.prediction is not None and w.gantt.timeline is not None,
                    timeout=120_000)
    assert w.gantt.timeline.ranks == [0, 1, 2, 3]
    assert w.summary.comm.value.text().endswith(" ms")
    left = w.gantt.plot.getPlotItem().getAxis("left")
    major, minor = left._tickLevels  # each rank labelled, its lanes as minor ticks
    assert [t[1] for t in major] == [f"rank {r}" for r in range(4)]
    assert len(minor) == len(w.gantt.timeline.lanes)


def test_a_table_too_big_for_a_gpu_is_ranked_row_wise_and_applied(make_window, qtbot,
                                                                   tmp_path):
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "pcie-4x-a100"}
    doc["model"]["nodes"][2]["params"]["tables"][0]["rows"] = 781_000_000   # 50 GB
    path = tmp_path / "big_table.json"
    path.write_text(json.dumps(doc))
    w = make_window(path)
    view = w.sharding.view
    with qtbot.waitSignal(w.sharding.runner.sigFinished, timeout=240_000):
        w.sharding.run_action.trigger()
    names = [p.plan.name for p in view.ranking.plans]
    assert "row-wise" in names and all(p.fits for p in view.ranking.plans)
    assert any("round-robin" in name for name, _ in view.ranking.refused)   # 50 GB on one
    best = view.ranking.plans[0]
    assert best.plan.assignment["tables/0"] == "rw"
    view.table.selectRow(0)
    view.apply_button.click()
    assert w.editor.document.parallelism()["embedding_sharding"]["tables/0"] == "rw"
    assert "1 row-wise" in w.inspector.sharding_label.text()
    parallelism = w.editor.document.parallelism()
    parallelism["embedding_sharding"] = {f"tables/{j}": "rw" for j in range(8)}
    w.editor.set_parallelism(parallelism)
    assert w.inspector.sharding_label.text() == "a plan: 8 row-wise"
