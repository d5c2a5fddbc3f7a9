"""Check plain data against the typed definition (:mod:`.definition`) and word every
problem as one line naming the field, e.g. ``model.nodes[1].params.layers[0]: must be
positive, got 0``.

msgspec stops at the first error and names it by a ``$.path``; :func:`check` reports every
problem: where a value does not convert, it descends into the parts (an object's fields, a
list's items, a mapping's values, the member of a tagged union that the value's tag picks)
and words each part that does not convert.  The wording follows the value and the declared
type, with the ``Meta.extra`` entries of :mod:`.definition` (``expected``, ``unknown``,
``fields``).
"""
from __future__ import annotations

import math
import re
import types
import typing
from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import Struct, UnsetType

__all__ = ["check", "short_repr"]

_BOUND = re.compile(r"Expected `[^`]+` (>=|>|<=|<) (\S+)$")
_LENGTH = re.compile(r"Expected `([^`]+)` of length >= (\d+)$")
_TYPE = re.compile(r"Expected `[^`]+`, got `[^`]+`$")
_UNIONS = (Union, types.UnionType)
_NAMES = {int: "an integer", float: "a finite number", str: "a string", bool: "true or false",
          type(None): "null", dict: "an object", list: "a list"}


def check(value, tp, where: str) -> tuple[Any, list[tuple[str, str]]]:
    """``value`` converted to ``tp`` and no problems, or ``None`` and every problem as
    ``(field path, message)``; ``where`` is the path of ``value`` (e.g. ``platform``)."""
    try:
        return msgspec.convert(value, tp), []
    except msgspec.ValidationError:
        problems: list[tuple[str, str]] = []
        _collect(value, tp, where, problems)
        return None, problems


def _field(where: str, key) -> str:
    """The path of ``key`` inside ``where``: ``training.lr``, or ``layout['a.b']`` for a key
    that would not read as one."""
    if isinstance(key, str) and key.strip() and key.isprintable() \
            and not any(c in key for c in ".[]"):
        return f"{where}.{key}" if where else key
    return f"{where or '(document)'}[{short_repr(key)}]"


def _collect(value, tp, where: str, out: list) -> None:
    try:
        msgspec.convert(value, tp)
        return
    except msgspec.ValidationError as exc:
        error = str(exc).partition(" - at `")[0]
    before = len(out)
    parts = _parts(value, tp, where, out)
    if parts is None:
        out.append((where or "(document)", _word(error, value, tp)))
        return
    for sub_value, sub_type, sub_where in parts:
        _collect(sub_value, sub_type, sub_where, out)
    if len(out) == before:  # every part converts: the problem is the whole's own
        out.append((where or "(document)", _word(error, value, tp)))


def _unwrap(tp) -> tuple[Any, dict]:
    """The type under its ``Annotated`` layers (an optional-by-UNSET union reduced to its
    type) and what those layers say: the merged ``Meta.extra`` entries, and the bounds
    ``ge``, ``gt`` and ``min_length``."""
    extra: dict = {}
    while True:
        if typing.get_origin(tp) is Annotated:
            tp, *metas = typing.get_args(tp)
            for meta in (m for m in metas if isinstance(m, msgspec.Meta)):
                bounds = {k: getattr(meta, k) for k in ("ge", "gt", "min_length")
                          if getattr(meta, k) is not None}
                extra = {**(meta.extra or {}), **bounds, **extra}
            continue
        if typing.get_origin(tp) in _UNIONS:
            members = [m for m in typing.get_args(tp) if m is not UnsetType]
            if len(members) == 1:
                tp = members[0]
                continue
        return tp, extra


def _members(tp) -> list:
    return [m for m in typing.get_args(tp) if m is not UnsetType] \
        if typing.get_origin(tp) in _UNIONS else [tp]


def _is_struct(tp) -> bool:
    return isinstance(tp, type) and issubclass(tp, Struct)


def _parts(value, tp, where: str, out: list) -> list | None:
    """The parts of ``value`` to check one by one, or ``None`` where it has none (a scalar,
    or a value of the wrong kind).  Unknown and missing fields and an unknown tag go to
    ``out`` directly."""
    base, extra = _unwrap(tp)
    members = [_unwrap(m)[0] for m in _members(base)]
    if isinstance(value, dict):
        structs = [m for m in members if _is_struct(m)]
        if structs and structs[0].__struct_config__.tag_field is not None:
            return _tagged_parts(value, structs, extra, where, out)
        if structs:
            return _struct_parts(value, structs[0], extra, where, out)
        mapping = next((m for m in members if typing.get_origin(m) is dict), None)
        if mapping is not None and all(isinstance(k, str) for k in value):
            item = typing.get_args(mapping)[1]
            return [(v, item, _field(where, k)) for k, v in value.items()]
    elif isinstance(value, list) and value:
        seq = next((m for m in members if typing.get_origin(m) is list), None)
        if seq is not None:
            item = typing.get_args(seq)[0]
            return [(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    return None


def _tagged_parts(value: dict, structs: list, extra: dict, where: str, out: list) -> list:
    tag_field = structs[0].__struct_config__.tag_field
    tag = value.get(tag_field)
    chosen = next((s for s in structs if type(tag) is str and s.__struct_config__.tag == tag),
                  None)
    if chosen is not None:
        return _struct_parts(value, chosen, {}, where, out, skip=tag_field)
    tags = [s.__struct_config__.tag for s in structs]
    if "unknown" in extra:
        known = ", ".join(tags)
        out.append((_field(where, tag_field),
                    f"unknown {extra['unknown']} {short_repr(tag)} (known: {known})"))
    elif "expected" in extra:
        out.append((where, f"expected {extra['expected']}, got {short_repr(value)}"))
    else:
        out.append((_field(where, tag_field), f"expected one of {tags}, got {short_repr(tag)}"))
    return []


def _struct_parts(value: dict, cls, extra: dict, where: str, out: list,
                  skip: str | None = None) -> list:
    fields = {f.encode_name: f for f in msgspec.structs.fields(cls)}
    if cls.__struct_config__.forbid_unknown_fields:
        what = extra.get("fields", "field")
        for key in value:
            if key not in fields and key != skip:
                known = ", ".join(fields) or "none"
                out.append((_field(where, key), f"unknown {what} (known: {known})"))
    parts = []
    for name, f in fields.items():
        if name in value:
            parts.append((value[name], f.type, _field(where, name)))
        elif f.required:
            out.append((_field(where, name), f"missing (expected {_expected(f.type)})"))
    return parts


def _expected(tp) -> str:
    """What a value of ``tp`` is, in words: ``a positive integer``, ``one of ['sgd', 'adam']``."""
    base, extra = _unwrap(tp)
    if "expected" in extra:
        return extra["expected"]
    members = _members(base)
    if len(members) > 1:
        return " or ".join(dict.fromkeys(_expected(m) for m in members))
    if typing.get_origin(base) is Literal:
        values = list(typing.get_args(base))
        return repr(values[0]) if len(values) == 1 else f"one of {values}"
    if _is_struct(base) or typing.get_origin(base) is dict:
        return "an object"
    if extra.get("min_length"):
        return "a non-empty string" if base is str else "a non-empty list"
    if typing.get_origin(base) is list:
        return "a list"
    if base in (int, float) and (extra.get("ge", 0) >= 1 or extra.get("gt", -1) >= 0):
        return "a positive integer" if base is int else "a positive number"
    return _NAMES.get(base, "a value")


def _literal_values(tp) -> list:
    return [v for m in _members(_unwrap(tp)[0]) if typing.get_origin(_unwrap(m)[0]) is Literal
            for v in typing.get_args(_unwrap(m)[0])]


def short_repr(value) -> str:
    """``repr(value)``, cut to one short line."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"<{value.bit_length()}-bit integer>"  # repr() refuses the longest
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _number(x) -> str:
    if isinstance(x, int) and x.bit_length() <= 128 and abs(x) >= 10 ** 6:
        return f"{x:,}"
    return short_repr(x)


def _word(error: str, value, tp) -> str:
    """One problem with ``value`` as ``tp``, from msgspec's ``error`` (the path cut off)."""
    extra = _unwrap(tp)[1]
    if isinstance(value, dict) and any(not isinstance(k, str) for k in value):
        key = next(k for k in value if not isinstance(k, str))
        return f"expected text keys, got {short_repr(key)}"
    if "unknown" in extra and _literal_values(tp) and (_TYPE.match(error)
                                                       or error.startswith("Invalid")):
        return (f"unknown {extra['unknown']} {short_repr(value)} "
                f"(known: {', '.join(map(str, _literal_values(tp)))})")
    if _TYPE.match(error) or error.startswith(("Invalid enum value", "Invalid value")):
        return f"expected {_expected(tp)}, got {short_repr(value)}"
    bound = _BOUND.match(error)
    if bound and isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return f"expected a finite number, got {short_repr(value)}"
        op, limit = bound.group(1), float(bound.group(2))
        if (op, limit) in ((">=", 1.0), (">", 0.0)):
            return f"must be positive, got {_number(value)}"
        limit = int(limit) if limit.is_integer() and isinstance(value, int) else limit
        return f"must be {op} {_number(limit)}, got {_number(value)}"
    length = _LENGTH.match(error)
    if length:
        return f"expected {_expected(tp)}, got {short_repr(value)}"
    return error[:1].lower() + error[1:]
