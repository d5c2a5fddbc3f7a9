"""Headless predictor core: scenarios -> captured op graphs -> simulated timelines.

This package never imports Qt; the GUI lives in :mod:`explorer`.
"""
import os

__version__ = "0.1.0"

# Kineto (torch 2.13) prints two "USDT: ... profiler_start/stop" lines on stderr for every
# profiled span: hundreds per calibration, drowning its progress lines.  Level 6 is above
# all of Kineto's levels; set KINETO_LOG_LEVEL yourself to see its messages again.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
