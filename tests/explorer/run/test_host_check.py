"""The GUI takes this host's check in the background and predicts again when it lands."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import threading

from explorer.run.host_check import HostCheck


def test_a_check_taken_says_so_and_one_that_fails_leaves_the_app_alone(qtbot, capsys):
    taken = HostCheck(ensure=lambda threads: True)
    with qtbot.waitSignal(taken.sigChecked, timeout=5000):
        assert taken.start(1)
    cached = HostCheck(ensure=lambda threads: False)   # already cached: nothing to say
    signals = []
    cached.sigChecked.connect(lambda: signals.append(1))
    cached.start(1)
    cached.thread.join(5)
    qtbot.wait(50)
    assert signals == []

    def broken(threads):
        raise OSError("no space left on device")

    failing = HostCheck(ensure=broken)
    failing.sigChecked.connect(lambda: signals.append(1))
    failing.start(1)
    failing.thread.join(5)
    qtbot.wait(50)
    assert signals == [] and "host check failed: no space left" in capsys.readouterr().err


def test_the_window_predicts_again_when_the_check_lands(make_window, qtbot):
    runs = []
    done = threading.Event()

    def fake_predict(doc, **kwargs):
        from predictors.engine.predict import predict
        runs.append(1)
        done.set()
        return predict(doc, **kwargs)

    w = make_window(predict_fn=fake_predict)
    qtbot.waitUntil(lambda: w.prediction is not None, timeout=30000)
    before = len(runs)
    check = HostCheck(w, ensure=lambda threads: True)
    check.sigChecked.connect(w.host_checked)
    check.start(1)
    qtbot.waitUntil(lambda: len(runs) > before, timeout=30000)
    assert "Host speed checked" in w.statusBar().currentMessage()
    qtbot.waitUntil(lambda: not w.controller.runner.is_running(), timeout=30000)


def test_the_check_waits_for_the_first_prediction_to_end(qtbot):
    from PySide6.QtCore import QObject, Signal

    class Controller(QObject):
        sigFinished = Signal(object)
        sigFailed = Signal(str)

    controller = Controller()
    calls = []
    check = HostCheck(ensure=lambda threads: calls.append(threads) or True)
    check.after_first_prediction(controller, threads=1)
    qtbot.wait(50)
    assert check.thread is None and calls == []     # the app is still busy predicting
    with qtbot.waitSignal(check.sigChecked, timeout=5000):
        controller.sigFailed.emit("a scenario with a problem")
    controller.sigFinished.emit(None)               # later runs start nothing
    check.thread.join(5)
    assert calls == [1]
