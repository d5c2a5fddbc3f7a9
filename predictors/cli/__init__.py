"""``python -m predictors``: the headless command line (no Qt is imported).

:mod:`.commands` holds the main commands; :mod:`.collective`, :mod:`.kernels` and
:mod:`.traces` add their own; :mod:`.args` holds what they share (the program's name,
argparse types, ``--platform``, output checks, ``--help`` examples)."""
from .commands import main

__all__ = ["main"]
