"""Plans evaluated on several processes: local workers, or a Dask cluster's.

A search or a sweep over many plans can outgrow one core.  :class:`PlanWorkers` hands
each batch of plans out in equal chunks, one per worker, and puts the answers back in
order.  Every worker builds the scenario's evaluator once (its rank graphs and template
ranks, :class:`~predictors.engine.plan_evaluator.PlanEvaluator`, or captured graphs per
plan where the evaluator cannot compose) and keeps it for every later batch.  The
evaluation is deterministic, so a search gives the same plans as on one process; only
the rate changes.

- ``workers=N``: N local processes (:mod:`concurrent.futures`, spawned).
- ``dask="tcp://host:8786"``: the workers of a running Dask scheduler (the ``cluster``
  extra: ``pip install -e ".[cluster]"``); each needs this package installed.
"""
from __future__ import annotations

import hashlib
import pickle
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

import numpy as np

__all__ = ["PlanWorkers", "WorkerError"]


class WorkerError(Exception):
    """A worker process stopped, or the cluster lost it."""

_EVALUATORS: dict[str, object] = {}   # per worker process: scenario key -> evaluate


def _evaluator(key: str, payload: bytes):
    """This process's evaluator of the scenario in ``payload`` (built once)."""
    hit = _EVALUATORS.get(key)
    if hit is None:
        from ..engine.parallel import RankGraphs  # deferred: imports torch
        from ..engine.plan_evaluator import plan_spans
        from ..engine.predict import prepare

        doc, profile, overheads = pickle.loads(payload)
        doc, platform, profile = prepare(doc, profile)
        hit, _ = plan_spans(RankGraphs(doc, platform, profile, overheads))
        _EVALUATORS[key] = hit
    return hit


def evaluate_chunk(key: str, payload: bytes, plans: list) -> np.ndarray:
    """Each rank's iteration (ms) of ``plans``, on the worker that runs this."""
    return np.asarray(_evaluator(key, payload)(plans), dtype=float)


class PlanWorkers:
    """Evaluate batches of plans of one scenario on worker processes (see the module)."""

    def __init__(self, doc: dict, profile=None, overheads=None, *, workers: int = 0,
                 dask: str | None = None):
        self.payload = pickle.dumps((doc, profile, overheads))
        self.key = hashlib.sha1(self.payload).hexdigest()
        self._client = self._pool = None
        if dask:
            try:
                from distributed import Client
            except ImportError:
                raise ValueError("--dask needs the cluster extra: pip install -e "
                                 "'.[cluster]'") from None
            try:
                self._client = Client(dask, timeout=10)
            except OSError as exc:
                raise ValueError(f"cannot reach the Dask scheduler at {dask}: {exc}") from None
            self.count = max(1, len(self._client.scheduler_info()["workers"]))
            # the scenario goes to every worker once, and each builds its evaluator
            self._data = self._client.scatter(self.payload, broadcast=True, hash=False)
            self._client.run(_evaluator, self.key, self.payload)
        else:
            if workers < 1:
                raise ValueError(f"workers must be 1 or more, got {workers}")
            self.count = workers
            # every worker builds the evaluator as it starts
            self._pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                                             initializer=_evaluator,
                                             initargs=(self.key, self.payload))

    def __call__(self, plans: list) -> np.ndarray:
        chunks = [c for c in np.array_split(np.arange(len(plans)), self.count) if len(c)]
        parts = [[plans[i] for i in c] for c in chunks]
        if self._client is not None:
            futures = [self._client.submit(evaluate_chunk, self.key, self._data, p,
                                           pure=False)
                       for p in parts]
            results = self._client.gather(futures)
        else:
            try:
                results = list(self._pool.map(evaluate_chunk, [self.key] * len(parts),
                                              [self.payload] * len(parts), parts))
            except BrokenProcessPool as exc:
                raise WorkerError(f"a worker process stopped: {exc}") from None
        return np.concatenate([np.atleast_2d(r) for r in results]) if results else \
            np.zeros((0, 0))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        if self._client is not None:
            self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
