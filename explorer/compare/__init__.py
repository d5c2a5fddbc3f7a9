"""Compare a prediction with a recorded trace: the Compare dock, trace loading and its
wiring into the main window (menu actions, drag and drop, export)."""
from .install import CompareController, install_compare, trace_paths_of
from .loader import TraceLoader
from .view import CompareView

__all__ = ["CompareView", "TraceLoader", "CompareController", "install_compare",
           "trace_paths_of"]
