"""Wires the Sharding dock into the main window: Run ▸ Rank Shardings, the ranking in a
worker thread (progress, cancel), and Apply, which writes a plan into the scenario as one
undo step."""
from __future__ import annotations

import json

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
        self._ranked_key: str | None = None
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
        # ui.md's order: Predict, Cancel, Calibrate This Device, Rank Shardings, Sweep
        run_menu.addAction(self.rank_action)
        w.cancel_action.triggered.connect(self.runner.cancel)  # Run ▸ Cancel stops it too
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
        doc.sigChanged.connect(self._check_stale)
        doc.sigReset.connect(self._on_reset)
        # a profile or overheads change starts a prediction: the ranking may be stale
        self.window.controller.sigStarted.connect(self._check_stale)

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
        self._ranked_key = self._key()
        self.view.set_running(True, "starting…")
        return self.runner.run(lambda progress, cancelled: self.rank_fn(
            snapshot, progress=progress, cancelled=cancelled, **kwargs))

    def apply(self, result) -> bool:
        """Write ``result``'s plan into the scenario (one undo step); refused while the
        ranking is out of date (it may name tables or ranks the scenario no longer has)."""
        if self.view.ranking is None or self._key() != self._ranked_key:
            self.window.statusBar().showMessage(
                "The scenario changed since the plans were ranked: rank them again first",
                8000)
            return False
        parallelism = self.window.editor.document.parallelism()
        parallelism["embedding_sharding"] = dict(result.plan.assignment)
        done = self.window.editor.set_parallelism(parallelism,
                                                  f"Apply sharding plan '{result.plan.name}'")
        self.window.statusBar().showMessage(
            f"Applied '{result.plan.name}' ({result.iteration_ms:.3f} ms predicted)" if done
            else f"The scenario already uses '{result.plan.name}'", 6000)
        return done

    # --- runner feedback --------------------------------------------------------------------

    def _key(self) -> str:
        """What a ranking depends on: the scenario but its layout and its plan, and the
        prediction's profile and overheads.  Applying one of the plans keeps it fresh."""
        doc = self.window.editor.document.snapshot()
        doc.pop("layout", None)
        doc.get("parallelism", {}).pop("embedding_sharding", None)
        c = self.window.controller
        return json.dumps([doc, str(c.profile) if isinstance(c.profile, str)
                           else id(c.profile), id(c.overheads)], sort_keys=True, default=str)

    def _check_stale(self, *_args) -> None:
        self.view.set_stale(self.view.ranking is not None and self._key() != self._ranked_key)
        self.view.mark_applied(self.window.editor.document.parallelism()
                               .get("embedding_sharding"))

    def _on_finished(self, ranking) -> None:
        self.view.set_running(False)
        self.view.set_ranking(ranking)
        self._check_stale()  # edited while it ran: shown, but as out of date
        if not ranking.plans:
            self.window.statusBar().showMessage("No sharding plan fits: " + "; ".join(
                w for _, w in ranking.refused), 10000)
            return
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
