"""Wires the Sharding dock into the main window: Run ▸ Rank Shardings, the ranking in a
worker thread (progress, cancel), and Apply, which writes a plan into the scenario as one
undo step."""
from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence

from predictors.predict import Cancelled
from predictors.profiles import ProfileError
from predictors.scenario import ScenarioError

from ..background import BackgroundRunner
from .view import ShardingView

__all__ = ["ShardingController", "install_sharding"]


def _rank_shardings(snapshot, **kwargs):
    from predictors.rank_sharding import rank_shardings
    return rank_shardings(snapshot, **kwargs)


class ShardingController(QObject):
    """Owns the Sharding dock and its run.

    Parameters
    ----------
    window : the :class:`~explorer.app.MainWindow`
    rank_fn : callable like :func:`predictors.rank_sharding.rank_shardings` (tests inject
        fakes); it gets the prediction's ``profile=`` and ``overheads=`` where they are set
    """

    def __init__(self, window, rank_fn=None):
        super().__init__(window)
        self.window = window
        self.rank_fn = rank_fn or _rank_shardings
        self.view = ShardingView()
        self.runner = BackgroundRunner((Cancelled,), (ScenarioError, ProfileError),
                                       "Could not rank the plans", self)
        self.dock = window._dock("Sharding", "shardingDock", self.view,
                                 Qt.BottomDockWidgetArea)
        window.tabifyDockWidget(window.timeline_dock, self.dock)
        window.timeline_dock.raise_()
        self._build_actions()
        self._connect()

    def _build_actions(self) -> None:
        w = self.window
        menus = [a.menu() for a in w.menuBar().actions() if a.menu() is not None]
        run_menu, view_menu = menus[2], menus[3]  # File, Edit, Run, View, Help
        self.rank_action = QAction("Rank &Shardings", w)
        self.rank_action.setShortcut(QKeySequence("Ctrl+Shift+R"))
        self.rank_action.setStatusTip("Predict every candidate embedding sharding plan on the "
                                      "platform's GPUs and rank them (Sharding dock)")
        self.rank_action.triggered.connect(self.rank)
        run_menu.insertAction(w.cancel_action, self.rank_action)
        acts = view_menu.actions()
        view_menu.insertAction(acts[4] if len(acts) > 4 else None,
                               self.dock.toggleViewAction())

    def _connect(self) -> None:
        v, r, doc = self.view, self.runner, self.window.editor.document
        v.sigRankRequested.connect(self.rank)
        v.sigCancelRequested.connect(r.cancel)
        v.sigApplyRequested.connect(self.apply)
        r.sigProgress.connect(v.set_progress)
        r.sigFinished.connect(self._on_finished)
        r.sigFailed.connect(self._on_failed)
        r.sigCancelled.connect(self._on_cancelled)
        doc.sigChanged.connect(lambda: v.set_stale(True))
        doc.sigReset.connect(self._on_reset)

    # --- actions ------------------------------------------------------------------------

    def rank(self) -> int:
        """Rank the current scenario's plans in the background; returns the run id."""
        self.dock.show()
        self.dock.raise_()
        c = self.window.controller
        kwargs = {}
        if c.profile is not None:
            kwargs["profile"] = c.profile
        if c.overheads is not None:
            kwargs["overheads"] = c.overheads
        snapshot = self.window.editor.document.snapshot()
        self.view.set_running(True, "starting…")
        return self.runner.run(lambda progress, cancelled: self.rank_fn(
            snapshot, progress=progress, cancelled=cancelled, **kwargs))

    def apply(self, result) -> bool:
        """Write ``result``'s plan into the scenario (one undo step)."""
        parallelism = self.window.editor.document.parallelism()
        parallelism["embedding_sharding"] = dict(result.plan.assignment)
        done = self.window.editor.set_parallelism(parallelism,
                                                  f"Apply sharding plan '{result.plan.name}'")
        self.window.statusBar().showMessage(
            f"Applied '{result.plan.name}' ({result.iteration_ms:.3f} ms predicted)" if done
            else f"The scenario already uses '{result.plan.name}'", 6000)
        return done

    # --- runner feedback --------------------------------------------------------------------

    def _on_finished(self, ranking) -> None:
        self.view.set_running(False)
        self.view.set_ranking(ranking)
        best = ranking.plans[0]
        self.window.statusBar().showMessage(
            f"Ranked {len(ranking.plans)} sharding plans in {ranking.elapsed_s:.1f} s: best "
            f"'{best.plan.name}', {best.iteration_ms:.3f} ms", 8000)

    def _on_failed(self, message: str) -> None:
        self.view.set_running(False)
        self.view.show_error(message)
        self.window.statusBar().showMessage(message, 10000)

    def _on_cancelled(self) -> None:
        self.view.set_running(False)
        self.window.statusBar().showMessage("Ranking of sharding plans cancelled", 4000)

    def _on_reset(self) -> None:
        self.runner.cancel()
        self.view.clear()

    def shutdown(self) -> bool:
        return self.runner.shutdown()


def install_sharding(window, rank_fn=None) -> ShardingController:
    """Add the Sharding dock and Run ▸ Rank Shardings to ``window``."""
    return ShardingController(window, rank_fn)
