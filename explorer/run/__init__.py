"""Predictions and their results: the prediction controller, the Summary dock, and the
shape the what-if docks (Sharding, Sweep) share."""
from .prediction import PredictionController, error_text
from .results_dock import ResultsController, ResultsView, memory_text
from .summary import SummaryPanel

__all__ = ["PredictionController", "error_text", "ResultsController", "ResultsView",
           "memory_text", "SummaryPanel"]
