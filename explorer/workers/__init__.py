"""Long work off the GUI thread: one worker lifecycle (progress, cancel, failure) for
predictions, calibrations, rankings, sweeps and trace loading."""
from .runner import BackgroundRunner

__all__ = ["BackgroundRunner"]
