"""Scenarios (format ``ml-dse/scenario``): the file format, its validation, and the block
kinds a model is built from (:mod:`.registry`)."""
from .format import (
                     Issue,
                     ScenarioError,
                     load_scenario,
                     read_scenario,
                     save_scenario,
                     validate_scenario,
)

__all__ = ["ScenarioError", "Issue", "load_scenario", "read_scenario", "save_scenario",
           "validate_scenario"]
