"""Recorded traces: Kineto and execution-trace readers, overhead statistics, replay."""
from .kineto import KinetoTrace, TraceError, read_kineto
from .recording import Recording, kernel_category, load_recording

__all__ = ["KinetoTrace", "TraceError", "read_kineto", "Recording",
           "load_recording", "kernel_category"]
