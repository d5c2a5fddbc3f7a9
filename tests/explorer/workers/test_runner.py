"""The one worker lifecycle: newest run wins, or one exclusive run at a time; cancellation
is any :class:`~predictors.utils.progress.Cancelled`."""
import threading
import time

import pytest

from explorer.workers import BackgroundRunner
from predictors.utils.progress import Cancelled


class StageCancelled(Cancelled):
    """A task's own kind of cancellation."""


def slow(steps=500, error=None, cancel_type=Cancelled, ended=None):
    """A call that reports progress every 5 ms and stops when cancelled."""

    def call(progress, cancelled):
        try:
            for k in range(steps):
                if cancelled():
                    raise cancel_type(f"step {k}")
                progress(k / steps, f"step {k}")
                time.sleep(0.005)
            if error is not None:
                raise error
            return steps
        finally:
            if ended is not None:
                ended.set()
    return call


def test_a_run_reports_progress_and_its_result(qtbot):
    runner = BackgroundRunner((ValueError,), "Could not run")
    seen = []
    runner.sigProgress.connect(lambda f, s: seen.append(s))
    with qtbot.waitSignal(runner.sigFinished, timeout=5_000) as done:
        runner.run(slow(steps=5))
    assert done.args == [5] and seen[-1] == "step 4"
    assert not runner.is_running() and runner.last_error is None
    assert runner.shutdown()


def test_failures_are_one_line_and_expected_ones_their_message_only(qtbot):
    runner = BackgroundRunner((ValueError,), "Could not run")
    with qtbot.waitSignal(runner.sigFailed, timeout=5_000) as failed:
        runner.run(slow(steps=2, error=ValueError("batch must be positive")))
    assert failed.args == ["batch must be positive"]
    with qtbot.waitSignal(runner.sigFailed, timeout=5_000) as failed:
        runner.run(slow(steps=2, error=OSError("disk full")))
    assert failed.args == ["Could not run: OSError: disk full"]
    assert isinstance(runner.last_error, OSError)
    assert runner.shutdown()


def test_newest_run_wins_and_a_cancel_is_reported_at_once(qtbot):
    runner = BackgroundRunner((), "Could not run")
    results = []
    runner.sigFinished.connect(results.append)
    runner.run(slow(steps=400))
    with qtbot.waitSignal(runner.sigFinished, timeout=5_000):
        runner.run(slow(steps=3))  # abandons the first
    assert results == [3]
    runner.run(slow(steps=400))
    with qtbot.waitSignal(runner.sigCancelled, timeout=100):
        assert runner.cancel()
    assert not runner.is_running() and not runner.cancel()
    assert runner.shutdown()


@pytest.mark.parametrize("cancel_type", [Cancelled, StageCancelled])
def test_any_cancelled_counts_as_a_cancel(qtbot, cancel_type):
    runner = BackgroundRunner((), "Could not run", exclusive=True)
    failed = []
    runner.sigFailed.connect(failed.append)
    runner.run(slow(cancel_type=cancel_type))
    with qtbot.waitSignal(runner.sigCancelled, timeout=5_000):
        runner.cancel()
    assert not failed
    assert runner.shutdown()


def test_exclusive_runs_one_at_a_time_and_reports_a_cancel_once_stopped(qtbot):
    runner = BackgroundRunner((), "Could not run", exclusive=True)
    ended = threading.Event()
    runner.run(slow(steps=400, ended=ended))
    with pytest.raises(RuntimeError):
        runner.run(slow(steps=1))
    with qtbot.waitSignal(runner.sigCancelled, timeout=5_000):
        assert runner.cancel()
        assert runner.is_running() or ended.is_set()  # not over until the call stops
    assert ended.is_set()
    qtbot.waitUntil(lambda: not runner.is_running(), timeout=2_000)
    with qtbot.waitSignal(runner.sigFinished, timeout=5_000):
        runner.run(slow(steps=1))
    assert runner.shutdown()


def test_an_error_while_stopping_on_request_is_a_cancel(qtbot):
    def call(progress, cancelled):
        while not cancelled():
            time.sleep(0.005)
        raise OSError("interrupted")
    runner = BackgroundRunner((), "Could not run", exclusive=True)
    failed = []
    runner.sigFailed.connect(failed.append)
    runner.run(call)
    with qtbot.waitSignal(runner.sigCancelled, timeout=5_000):
        runner.cancel()
    assert not failed
    assert runner.shutdown()


def test_exclusive_shutdown_stops_the_run_and_still_reports_it(qtbot):
    runner = BackgroundRunner((), "Could not run", exclusive=True)
    ended = threading.Event()
    runner.run(slow(steps=1000, ended=ended))
    with qtbot.waitSignal(runner.sigCancelled, timeout=5_000):
        assert runner.shutdown(5_000)
        assert ended.is_set() and not runner.is_running()
