"""Quantities as people read them."""
from __future__ import annotations

__all__ = ["format_bytes"]


def format_bytes(n: float, digits: int = 1) -> str:
    """``812 MB``, ``25.1 GB``, ``64.0 TB``, ``-4.0 MB``: decimal units, as memory sizes are
    quoted (``digits`` after the point: 2 where a size is compared with a limit it is
    near)."""
    if n < 0:
        return "-" + format_bytes(-n, digits)
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.{digits}f} {unit}"
    return f"{n:,.0f} B"
