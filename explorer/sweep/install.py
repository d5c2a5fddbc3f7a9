"""Wires the Sweep dock into the main window: Run ▸ Sweep, the predictions in a worker
thread (progress, cancel), and Apply Value, which sets the selected value in the scenario
as one undo step."""
from __future__ import annotations

from predictors.hardware.platforms import PLATFORM_PRESETS, resolve_platform
from predictors.plan.sweep import SWEEPABLE, parse_values
from predictors.profiles import ProfileError
from predictors.scenario.format import DTYPES, INPUT_PIPELINES, OPTIMIZERS, ScenarioError
from predictors.utils.formatting import format_bytes

from ..run.results_dock import ResultsController
from ..workers import BackgroundRunner
from .view import SweepView, none_text

__all__ = ["SweepController", "install_sweep", "default_values"]


def _sweep(snapshot, param, values, **kwargs):
    from predictors.plan.sweep import sweep
    return sweep(snapshot, param, values, **kwargs)


def _largest_batch(snapshot, **kwargs):
    from predictors.plan.capacity import largest_batch
    return largest_batch(snapshot, **kwargs)


def batch_ladder(largest: int, steps: int = 5) -> list[int]:
    """Batch sizes halving down from ``largest``: ``[B/16, B/8, B/4, B/2, B]``."""
    return sorted({max(1, largest >> k) for k in range(steps)})


def default_values(doc: dict, param: str) -> list:
    """Values worth a first look: a quarter to four times the batch, the platforms of the
    scenario's kind (GPU or CPU), every dtype, every optimizer, every input pipeline."""
    if param == "batch_size":
        try:
            b = max(1, int(doc["training"]["batch_size"]))
        except (KeyError, TypeError, ValueError):  # an unfinished scenario
            b = 512
        return sorted({max(1, b // 4), max(1, b // 2), b, 2 * b, 4 * b})
    if param == "platform":
        try:
            cpu = resolve_platform(doc["platform"]).device == "cpu"
        except (KeyError, TypeError, ValueError):
            cpu = False
        return [name for name, p in PLATFORM_PRESETS.items() if (p.device == "cpu") == cpu]
    if param == "optimizer":
        return list(OPTIMIZERS)
    if param == "input_pipeline":
        return list(INPUT_PIPELINES)
    return list(DTYPES)


class SweepController(ResultsController):
    """Owns the Sweep dock and its run.

    Parameters
    ----------
    window : the :class:`~explorer.window.MainWindow`
    sweep_fn : callable like :func:`predictors.plan.sweep.sweep` (tests inject fakes)
    """

    title = "Sweep"
    object_name = "sweepDock"
    action = ("S&weep", "Ctrl+Shift+W", "Predict the scenario for each value of one "
              "setting: batch size, platform, dtype, optimizer or input pipeline (Sweep dock)")
    failure = "Could not sweep"

    def __init__(self, window, sweep_fn=None, fit_fn=None):
        super().__init__(window, SweepView(), sweep_fn or _sweep)
        # "Up to What Fits": the largest batch first (captures only), then the sweep
        self.fit_fn = fit_fn or _largest_batch
        self._fit_note = ""   # what the last search found, for the sweep's message
        self._fit_key: str | None = None   # the scenario the search is for
        self.fit_runner = BackgroundRunner((ScenarioError, ProfileError),
                                           "Could not find the largest batch", self)
        fr = self.fit_runner
        self.view.sigFitRequested.connect(self.fit)
        self.view.sigCancelRequested.connect(fr.cancel)
        window.cancel_action.triggered.connect(fr.cancel)
        fr.sigProgress.connect(self.view.set_progress)
        fr.sigFinished.connect(self._on_fit)
        fr.sigFailed.connect(self._on_failed)
        fr.sigCancelled.connect(self._on_cancelled)
        self._param = "batch_size"   # of the run in progress
        self._values: list = []
        self._typed: dict[str, str] = {}  # what the user typed per setting
        self._shown_param = self.view.param()
        self.view.sigParamChanged.connect(self._on_param)
        self.view.values_edit.textEdited.connect(
            lambda text: self._typed.__setitem__(self.view.param(), text))
        window.editor.document.sigReset.connect(self._on_new_document)
        self._fill_defaults(self.view.param())

    def _on_new_document(self) -> None:
        self._typed.clear()
        self._fill_defaults(self.view.param())

    def _on_param(self, param: str) -> None:
        if param in self._typed:
            self.view.values_edit.setText(self._typed[param])
        else:
            self._fill_defaults(param)

    def _fill_defaults(self, param: str) -> None:
        self.view.set_values(default_values(self.window.editor.document.snapshot(), param))

    def fit(self) -> int:
        """Find the largest batch that fits the platform's GPUs, in the background; the
        batch sizes up to it are then swept."""
        self.dock.show()
        self.dock.raise_()
        self.runner.cancel()   # one run at a time in this dock
        snapshot = self.window.editor.document.snapshot()
        self._fit_key = self.key(for_run=True)
        profile = self.window.controller.profile
        kwargs = {"profile": profile} if profile is not None else {}
        self.view.set_running(True, "finding the largest batch that fits…")
        return self.fit_runner.run(lambda progress, cancelled: self.fit_fn(
            snapshot, progress=progress, cancelled=cancelled, **kwargs))

    def run(self) -> int | None:
        self.fit_runner.cancel()   # a sweep asked for now replaces a search in progress
        return self._sweep_values()

    def _on_fit(self, capacity) -> None:
        self.view.set_running(False)
        if self.key(for_run=True) != self._fit_key or self.view.param() != "batch_size":
            # edited (or another setting picked) meanwhile: the limit is for another step
            self.window.statusBar().showMessage(
                "The scenario changed while the largest batch was searched: search again",
                8000)
            return
        if capacity.batch_size is None:
            message = (f"Not even batch {capacity.over_batch:,} fits {capacity.device}: "
                       f"its step needs {format_bytes(capacity.peak_bytes)}")
            self.view.show_error(message)
            self.window.statusBar().showMessage(message, 10000)
            return
        self.view.set_values(batch_ladder(capacity.batch_size))
        self._typed["batch_size"] = self.view.values_edit.text()
        # near the limit one decimal is too coarse
        self._fit_note = (f"Largest batch that fits {capacity.device}: "
                          f"{capacity.batch_size:,} (peak {format_bytes(capacity.peak_bytes, 2)}"
                          f" of {format_bytes(capacity.device_bytes, 2)})")
        self.window.statusBar().showMessage(self._fit_note + "; sweeping up to it", 10000)
        self._sweep_values()

    def _on_failed(self, message: str) -> None:
        self._fit_note = ""
        super()._on_failed(message)

    def _on_cancelled(self) -> None:
        self._fit_note = ""
        super()._on_cancelled()

    def _on_reset(self) -> None:
        self.fit_runner.cancel()
        super()._on_reset()

    def shutdown(self) -> bool:
        # both, whatever the first answers: a worker left unreferenced aborts the app
        fit_stopped = self.fit_runner.shutdown(5000)
        return super().shutdown() and fit_stopped

    def shown_param(self) -> str:
        """The setting of the results on screen (not of a run in progress)."""
        return self.view.shown.param if self.view.shown is not None else self._param

    def _sweep_values(self) -> int | None:
        """Sweep the values in the dock; a value list that does not parse is shown, not
        run."""
        try:
            self._values = parse_values(self.view.param(), self.view.values_edit.text())
        except ValueError as exc:
            self.dock.show()
            self.dock.raise_()
            self.view.show_error(str(exc))
            return None
        self._param = self.view.param()
        self._typed[self._param] = self.view.values_edit.text()
        return super().run()

    def call(self, snapshot, **kwargs):
        return self.fn(snapshot, self._param, list(self._values), **kwargs)

    def ignored(self, for_run: bool = False):
        section, key, _, _ = SWEEPABLE[self._param if for_run else self.shown_param()]
        return [(section, None if section == "platform" else key)]

    def show(self, result) -> str:
        self.view.set_sweep(result)
        note, self._fit_note = self._fit_note, ""
        best = result.best()
        if best is None:
            message = f"No value of the sweep: {none_text(result)}"
        else:
            message = (f"Swept {len(result.rows)} values in {result.elapsed_s:.1f} s: "
                       f"fastest {result.param} = {best.value}, "
                       f"{best.records_per_s:,.0f} samples/s")
        return f"{note}. {message}" if note else message

    def _current(self):
        section, key, _, _ = SWEEPABLE[self.shown_param()]
        doc = self.window.editor.document.snapshot()
        return doc["platform"].get("preset") if section == "platform" else doc[section][key]

    def check_stale(self, *args) -> None:
        super().check_stale(*args)
        if self.view.shown is not None:
            self.view.mark_applied(self._current())

    def apply(self, row) -> bool:
        """Set the row's value in the scenario (one undo step)."""
        if self.runner.is_running() or self.refuse_stale() or row.error:
            return False
        param = self.shown_param()
        section, key, _, _ = SWEEPABLE[param]
        editor, doc = self.window.editor, self.window.editor.document
        if section == "platform":
            platform = {"preset": row.value}
            if row.value == "local-cpu" and "threads" in doc.platform():
                platform["threads"] = doc.platform()["threads"]
            done = editor.set_platform(platform)
        else:
            training = doc.training()
            training[key] = row.value
            done = editor.set_training(training)
        self.window.statusBar().showMessage(
            f"Set {param} = {row.value} ({row.iteration_ms:.3f} ms predicted)" if done
            else f"The scenario already uses {param} = {row.value}", 6000)
        return done


def install_sweep(window, sweep_fn=None) -> SweepController:
    """Add the Sweep dock and Run ▸ Sweep to ``window``."""
    return SweepController(window, sweep_fn)
