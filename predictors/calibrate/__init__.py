"""Calibration: measure this device, fit kernel and overhead models, validate them.

Importing this package loads no torch; :mod:`.calibrate` does.
"""


class CalibrationCancelled(Exception):
    """Raised inside ``calibrate_cpu`` when its ``cancelled`` callback answers True."""
