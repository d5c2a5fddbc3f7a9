"""PredictionController: debounced runs in a QThread, cancel, supersede, errors, shutdown."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import threading
import time

import pytest
from PySide6.QtCore import QObject, Signal

from explorer.run.prediction import PredictionController
from explorer.timeline.sample import synthetic_timeline
from predictors.engine import predict as predict_module
from predictors.engine.predict import Prediction
from predictors.scenario.format import Issue, ScenarioError, load_scenario
from predictors.utils.progress import Cancelled

DEFAULT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "resources", "scenarios",
                       "small_dlrm.json")


class FakeDocument(QObject):
    sigChanged = Signal()
    sigReset = Signal()

    def __init__(self, doc):
        super().__init__()
        self.doc = doc

    def snapshot(self):
        return self.doc  # deliberately the live dict: the controller must copy it


class FakePredict:
    """Records its calls; sleeps ``delay`` in small steps, polling ``cancelled``."""

    def __init__(self, delay=0.0, poll=True, error=None):
        self.delay, self.poll, self.error = delay, poll, error
        self.calls = []
        self.threads = []

    def __call__(self, scenario, progress=None, cancelled=None):
        self.calls.append(scenario)
        self.threads.append(threading.current_thread())
        steps = 20
        for k in range(steps):
            if self.poll and cancelled():
                raise Cancelled("fake")
            progress(k / steps, f"step {k}")
            time.sleep(self.delay / steps)
        if self.error is not None:
            raise self.error
        tl = synthetic_timeline(steps=4)
        return Prediction(scenario.get("name", ""), "fake", "cpu", tl, tl.span_ms(),
                          [{"rank": 0, "iteration_ms": tl.span_ms(),
                            "device_active_ms": tl.device_active_ms(0)}],
                          len(tl), tl.top_ops(5), [], 0.0)


def python_threads():
    # QThreads that ran Python code appear as _DummyThread entries forever; ignore those and
    # check the QThreads themselves with isRunning().
    return [t for t in threading.enumerate() if not isinstance(t, threading._DummyThread)]


@pytest.fixture
def no_leftover_threads():
    before = len(python_threads())
    yield
    assert len(python_threads()) <= before


def make(qtbot, fake, doc=None, debounce_ms=30):
    document = FakeDocument(doc if doc is not None else {"name": "n", "x": [1]})
    c = PredictionController(document, predict_fn=fake, debounce_ms=debounce_ms)
    return document, c


def test_default_predict_is_the_real_one():
    assert PredictionController().predict_fn is predict_module.predict


def test_run_finishes_off_the_gui_thread_and_leaves_no_threads(qtbot, no_leftover_threads):
    fake = FakePredict(delay=0.05)
    _, c = make(qtbot, fake)
    progress = []
    c.sigProgress.connect(lambda f, s: progress.append((f, s)))
    with qtbot.waitSignal(c.sigFinished, timeout=5000) as done:
        c.start()
        workers = list(c.runner._threads)
    assert isinstance(done.args[0], Prediction) and done.args[0].scenario_name == "n"
    assert fake.threads[0] is not threading.main_thread()
    assert progress and progress[0] == (0.0, "step 0")
    assert not c.is_running()
    assert c.shutdown()
    assert not c.runner._threads
    assert workers and not any(w.isRunning() for w in workers)


def test_worker_gets_a_frozen_snapshot(qtbot):
    fake = FakePredict(delay=0.1)
    document, c = make(qtbot, fake)
    with qtbot.waitSignal(c.sigFinished, timeout=5000):
        c.start()
        document.doc["x"].append(2)  # an edit while the worker runs
    assert fake.calls[0] == {"name": "n", "x": [1]}
    assert fake.calls[0] is not document.doc
    c.shutdown()


def test_edits_are_debounced_into_one_run(qtbot):
    fake = FakePredict()
    document, c = make(qtbot, fake, debounce_ms=100)
    started = []
    c.sigStarted.connect(lambda: started.append(1))
    for _ in range(5):
        document.sigChanged.emit()
        qtbot.wait(10)
    assert c.is_pending() and not started
    with qtbot.waitSignal(c.sigFinished, timeout=5000):
        pass
    assert len(started) == 1 and len(fake.calls) == 1
    c.shutdown()


def test_cancel_stops_a_slow_prediction(qtbot, no_leftover_threads):
    fake = FakePredict(delay=30.0)
    _, c = make(qtbot, fake)
    finished = []
    c.sigFinished.connect(finished.append)
    with qtbot.waitSignal(c.sigProgress, timeout=5000):
        c.start()
        workers = list(c.runner._threads)
    with qtbot.waitSignal(c.sigCancelled, timeout=1000):
        assert c.cancel()
    t0 = time.monotonic()
    assert c.shutdown(timeout_ms=5000)
    assert time.monotonic() - t0 < 5
    assert not finished and not c.is_running()
    assert not any(w.isRunning() for w in workers)


def test_a_new_run_supersedes_the_previous_one(qtbot):
    fake = FakePredict(delay=0.3)
    document, c = make(qtbot, fake)
    results = []
    c.sigFinished.connect(results.append)
    c.start({"name": "first"})
    with qtbot.waitSignal(c.sigFinished, timeout=5000):
        c.start({"name": "second"})
    qtbot.wait(100)
    assert [p.scenario_name for p in results] == ["second"]
    c.shutdown()


def test_superseded_run_that_ignores_cancel_is_dropped(qtbot):
    fake = FakePredict(delay=0.3, poll=False)
    _, c = make(qtbot, fake)
    results = []
    c.sigFinished.connect(results.append)
    c.start({"name": "first"})
    qtbot.wait(50)
    c.start({"name": "second"})
    qtbot.waitUntil(lambda: bool(results), timeout=5000)
    assert c.shutdown()
    assert [p.scenario_name for p in results] == ["second"]


def test_failure_reports_the_field(qtbot):
    error = ScenarioError([Issue("model.nodes[1].params.layers", "expected a list", "mlp")])
    fake = FakePredict(error=error)
    _, c = make(qtbot, fake)
    with qtbot.waitSignal(c.sigFailed, timeout=5000) as failed:
        c.start()
    assert "model.nodes[1].params.layers" in failed.args[0]
    assert c.last_error is error and not c.is_running()
    fake.error = RuntimeError("boom")
    with qtbot.waitSignal(c.sigFailed, timeout=5000) as failed:
        c.start()
    assert "boom" in failed.args[0]
    c.shutdown()


def test_real_predict_on_the_default_scenario(qtbot, no_leftover_threads):
    c = PredictionController()
    with qtbot.waitSignal(c.sigFinished, timeout=120_000) as done:
        c.start(load_scenario(DEFAULT))
    result = done.args[0]
    assert c.shutdown()
    # the worker's result is the core's prediction of that scenario
    direct = predict_module.predict(load_scenario(DEFAULT))
    assert result.iteration_ms == pytest.approx(direct.iteration_ms)
    assert len(result.timeline) == len(direct.timeline) > 0


def test_automatic_gc_is_paused_until_the_worker_thread_has_stopped(qtbot):
    """The GUI thread must not start a collection while a worker still holds torch
    objects: the pause ends on the GUI thread once the thread is reaped, not when the
    worker leaves predict."""
    import gc

    assert gc.isenabled()
    seen = []

    def fake(scenario, progress=None, cancelled=None):
        seen.append(gc.isenabled())
        return FakePredict()(scenario, progress, cancelled)

    _, c = make(qtbot, fake)
    with qtbot.waitSignal(c.sigFinished, timeout=5000):
        c.start()
        assert not gc.isenabled()  # from the start, on the GUI thread
    qtbot.waitUntil(lambda: not c.runner._threads, timeout=5000)
    assert seen == [False] and gc.isenabled()
    assert c.shutdown()
