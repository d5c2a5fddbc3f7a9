"""Calibration: measure this device, fit kernel and overhead models, validate them."""
