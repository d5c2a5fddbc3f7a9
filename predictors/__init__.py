"""Headless predictor core: scenarios -> captured op graphs -> simulated timelines.

This package never imports Qt; the GUI lives in :mod:`explorer`.
"""
__version__ = "0.1.0"
