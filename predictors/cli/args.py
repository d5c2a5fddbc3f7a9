"""What the sub-commands share: the program's name, argparse types, ``--platform``,
output checks and the examples shown by ``--help``."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from ..hardware.platforms import PLATFORM_PRESETS
from ..scenario.format import (
    FORMAT,
    Issue,
    ScenarioError,
    load_scenario,
    validate_platform,
)
from ..utils.fileio import writable_target

__all__ = [
    "PLATFORM_HELP",
    "count",
    "examples",
    "platform_section",
    "positive_float",
    "positive_int",
    "profile_arg",
    "program_name",
    "scenario_arg",
    "unwritable",
    "unwritable_outputs",
    "usage_error",
]

PLATFORM_HELP = ("a preset (e.g. dgx-a100), a scenario file (its platform) or a JSON file "
                 "holding a platform section")


def program_name(argv0: str | None = None) -> str:
    """``ml-dse`` when run as the installed console script, else ``python -m predictors``
    (how the package runs from a checkout)."""
    name = Path(sys.argv[0] if argv0 is None else argv0).name
    return "ml-dse" if name in ("ml-dse", "ml-dse.exe", "ml-dse-script.py") else \
        "python -m predictors"


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse turns the error into exit 2)."""
    return _int_at_least(text, 1)


def count(text: str) -> int:
    """An argparse type: a whole number >= 0."""
    return _int_at_least(text, 0)


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def platform_section(arg: str, flag: str = "--platform") -> dict:
    """The validated ``platform`` section that ``--platform ARG`` names: a preset name, a
    scenario file (its platform), or a JSON file holding a platform section
    (``{"preset": ...}``, ``{"nodes": [...], "edges": [...]}``, or an object with such a
    ``platform`` key).  An unknown name or a bad file raises
    :class:`~predictors.scenario.format.ScenarioError` that names the flag and the file."""

    if arg in PLATFORM_PRESETS:
        return validate_platform({"preset": arg}, flag)
    path = Path(arg).expanduser()
    if not path.exists():
        raise ScenarioError([Issue(repr(arg), "no preset and no file of that name (presets: "
                                              f"{', '.join(PLATFORM_PRESETS)})")], flag)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ScenarioError([Issue(str(path), f"not a readable JSON file ({reason})")],
                            flag) from None
    try:
        if isinstance(doc, dict) and doc.get("format") == FORMAT:
            return load_scenario(path)["platform"]
        if isinstance(doc, dict) and "platform" in doc and "nodes" not in doc:
            doc = doc["platform"]
        return validate_platform(doc)
    except ScenarioError as exc:
        raise ScenarioError([Issue(f"{path}: {i.field}", i.message, i.node_id)
                             for i in exc.issues], flag) from None


def unwritable(path: str) -> str | None:
    """Why a file cannot be written at ``path`` (its folder is created), or None."""


    if Path(path).expanduser().is_dir():
        return "is a folder; give a file name"
    try:
        writable_target(Path(path).expanduser())
    except OSError as exc:
        return str(exc)
    folder = Path(path).expanduser().resolve().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"cannot write in {folder}: {exc.strerror or exc}"
    return None


def scenario_arg(args) -> dict:
    """The scenario of ``args.scenario``, on the platform of ``--platform`` if given."""
    doc = load_scenario(args.scenario)
    if getattr(args, "platform", None):
        doc["platform"] = platform_section(args.platform)
    return doc


def profile_arg(args):
    """``--profile`` as the predictors take it (None: the device's bundled profile)."""
    return None if args.profile in (None, "default") else args.profile


def unwritable_outputs(*flags: tuple[str, str | None]) -> str | None:
    """``FLAG PATH: why`` for the first output file that cannot be written, or None."""
    for flag, target in flags:
        problem = unwritable(target) if target else None
        if problem:
            return f"{flag} {target}: {problem}"
    return None


def usage_error(message: str) -> int:
    """Print ``error: message`` on stderr; the exit status of a user error, 2."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def examples(*lines: str) -> dict:
    """``add_parser`` keyword arguments for a ``--help`` that ends with example command
    lines; ``%(prog)s`` in a line stands for the sub-command (``ml-dse predict``)."""
    text = "examples:\n" + "\n".join(f"  {line}" for line in lines)
    return {"epilog": text, "formatter_class": argparse.RawDescriptionHelpFormatter}
