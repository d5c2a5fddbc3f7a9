"""Device profiles in the GUI: the Profiles tab, the calibration of this device, and CPU
overheads measured from the user's recorded trace."""
from .calibration import CalibrationDialog, CalibrationRunner
from .install import ProfilesController, install_profiles
from .panel import ProfilesPanel

__all__ = ["CalibrationDialog", "CalibrationRunner", "ProfilesController",
           "install_profiles", "ProfilesPanel"]
