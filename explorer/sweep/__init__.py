"""One setting swept over values, side by side: the Sweep dock and Run ▸ Sweep."""
from .install import SweepController, default_values, install_sweep
from .view import SweepView

__all__ = ["SweepController", "SweepView", "default_values", "install_sweep"]
