"""The public GPU recordings in ``../shared/data/traces``, grouped into jobs."""
from __future__ import annotations

import gzip
import re
from collections import defaultdict
from pathlib import Path

__all__ = ["TRACES_DIR", "discover_jobs"]

TRACES_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces"


def _head(path: Path, n: int = 65536) -> bytes:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return f.read(n)


def discover_jobs(root: Path) -> list[tuple[str, list[str], list[str]]]:
    """``(job name, Kineto files, ET files)`` for every job under ``root``."""
    jobs = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        kineto, et = defaultdict(list), defaultdict(list)
        for f in sorted(folder.iterdir()):
            if not re.search(r"\.json(\.gz)?$", f.name):
                continue
            head = _head(f)
            group = et if b'"nodes"' in head and b'"traceEvents"' not in head else kineto
            group[re.sub(r"\d+", "#", f.name)].append(str(f))
        for key, files in kineto.items():
            match = [v for v in et.values() if len(v) == len(files)]
            stem = re.sub(r"_(trace|kineto)\b.*", "", key)
            named = [v for v in match if Path(v[0]).name.startswith(stem.split("#")[0])]
            ets = named[0] if named else (match[0] if len(match) == 1 else [])
            jobs.append((f"{folder.name}/{key}", files, ets))
    return jobs
