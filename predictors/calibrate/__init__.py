"""Calibration: measure this device, fit kernel and overhead models, validate them.

Importing this package loads no torch; :mod:`.calibrate` does.
"""

