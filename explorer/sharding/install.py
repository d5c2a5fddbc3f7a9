"""Wires the Sharding dock into the main window: Run ▸ Rank Shardings, the ranking in a
worker thread (progress, cancel), and Apply, which writes a plan into the scenario as one
undo step."""
from __future__ import annotations

from ..run.results_dock import ResultsController
from .view import ShardingView

__all__ = ["ShardingController", "install_sharding"]


def _rank_shardings(snapshot, **kwargs):
    from predictors.plan.rank_sharding import rank_shardings
    return rank_shardings(snapshot, **kwargs)


class ShardingController(ResultsController):
    """Owns the Sharding dock and its run.

    Parameters
    ----------
    window : the :class:`~explorer.window.MainWindow`
    rank_fn : callable like :func:`predictors.plan.rank_sharding.rank_shardings` (tests inject
        fakes); it gets the prediction's ``profile=`` and ``overheads=`` where they are set,
        and the dock's search budget as ``budget_s=``
    """

    title = "Sharding"
    object_name = "shardingDock"
    action = ("Rank &Shardings", "Ctrl+Shift+R", "Predict every candidate embedding "
              "sharding plan on the platform's GPUs and rank them (Sharding dock)")
    failure = "Could not rank the plans"

    def __init__(self, window, rank_fn=None):
        super().__init__(window, ShardingView(), rank_fn or _rank_shardings)

    def run(self) -> int:
        self._budget_s = self.view.budget_s()   # read here: call runs in the worker
        return super().run()

    def call(self, snapshot, **kwargs):
        kwargs.setdefault("budget_s", getattr(self, "_budget_s", self.view.budget_s()))
        return self.fn(snapshot, **kwargs)

    def ignored(self, for_run: bool = False):
        return [("parallelism", "embedding_sharding")]  # applying a plan keeps it fresh

    def show(self, ranking) -> str:
        self.view.set_ranking(ranking)
        if not ranking.plans:
            return "No sharding plan fits: " + "; ".join(w for _, w in ranking.refused)
        best = ranking.plans[0]
        searched = getattr(ranking, "evaluated", 0)
        return (f"Ranked {len(ranking.plans)} sharding plans"
                + (f" ({searched:,} simulated)" if searched else "")
                + f" in {ranking.elapsed_s:.1f} s: "
                f"best '{best.plan.name}', {best.iteration_ms:.3f} ms")

    def check_stale(self, *args) -> None:
        super().check_stale(*args)
        self.view.mark_applied(self.window.editor.document.parallelism()
                               .get("embedding_sharding"))

    def apply(self, result) -> bool:
        """Write ``result``'s plan into the scenario (one undo step); refused while the
        ranking is out of date (it may name tables or ranks the scenario no longer has)."""
        if self.refuse_stale():
            return False
        parallelism = self.window.editor.document.parallelism()
        parallelism["embedding_sharding"] = result.plan.to_json()["assignment"]
        done = self.window.editor.set_parallelism(parallelism,
                                                  f"Apply sharding plan '{result.plan.name}'")
        self.window.statusBar().showMessage(
            f"Applied '{result.plan.name}' ({result.iteration_ms:.3f} ms predicted)" if done
            else f"The scenario already uses '{result.plan.name}'", 6000)
        return done


def install_sharding(window, rank_fn=None) -> ShardingController:
    """Add the Sharding dock and Run ▸ Rank Shardings to ``window``."""
    return ShardingController(window, rank_fn)
