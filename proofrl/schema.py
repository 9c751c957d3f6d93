"""The one schema library of proofrl's configs (pydantic): typed sections, checked when they load.

Every config section (the trainer's recipe, its ``reward:`` section, ``proofrl serve``'s file) is a
:class:`Config`: unknown keys are errors, every enumeration is a ``Literal`` or :func:`one_of` a live registry,
every range is a constraint. :func:`validate` turns pydantic's report into one :class:`~proofrl.errors.ConfigError`
line that names the dotted key and what it accepts, for example::

    reward.unlikeliness.beta_rank must be in [0, 1], got 2
    ppo.agg_mode must be one of ['seq-mean-token-mean', 'seq-mean-token-sum', …], got 'mean'
    unknown keys in rollout: ['grup_size']; known: ['base_url', 'chunk_prompts', …]
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import annotated_types
from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from .errors import ConfigError

M = TypeVar("M")

if TYPE_CHECKING:  # the type checker needs pydantic's metaclass by name; at run time it is BaseModel's own
    from pydantic._internal._model_construction import ModelMetaclass as _ModelMetaclass
else:
    _ModelMetaclass = type(BaseModel)


class _ConfigType(_ModelMetaclass):
    """``Config(...)`` called in code: fields may be given positionally, in declaration order (as the
    dataclasses these sections replaced allowed), and a mistake is a :class:`ConfigError`. Validation of nested
    data does not come through here, so its errors keep their full dotted keys."""

    def __call__(cls, *args: Any, **data: Any) -> Any:
        names = list(cast(type[BaseModel], cls).model_fields)
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__} takes at most {len(names)} positional arguments")
        data.update(zip(names, args, strict=False))
        try:
            return super().__call__(**data)
        except ValidationError as e:
            raise ConfigError(describe(e, cls)) from None


class Config(BaseModel, metaclass=_ConfigType):
    """A config section: frozen, unknown keys forbidden, attribute access (``cfg.ppo.kl_coef``).

    ``None`` given to a ``str`` field means ``""`` (``--set data.eval=`` clears a path); numbers given to a
    ``str`` field are read as text (``--set out=2024``). ``section["key"]`` reads a field too. Built in code,
    fields may be positional, and a bad value raises :class:`ConfigError`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    @model_validator(mode="before")
    @classmethod
    def _none_is_empty_text(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            text = {name for name, f in cls.model_fields.items() if f.annotation is str}
            if any(data.get(k, "") is None for k in text):
                data = {k: ("" if k in text and v is None else v) for k, v in data.items()}
        return data

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists, not tuples) that YAML can write and :func:`validate` reads back to an equal section."""
        return self.model_dump(mode="json")


def one_of(names: Callable[[], Iterable[str]], what: str = "") -> AfterValidator:
    """A ``str`` field checked against a live registry: ``Annotated[str, one_of(lambda: AGG_MODES.names())]``.
    ``names`` is called when a value is checked, so registrations made after import count."""

    def check(value: str) -> str:
        valid = list(names())
        if value not in valid:
            raise PydanticCustomError("one_of", "must be one of {choices}", {"choices": valid})
        return value

    return AfterValidator(check)


def validate(cls: type[M], data: Any, where: str = "") -> M:
    """``cls`` (a :class:`Config`) from plain data; a :class:`ConfigError` with one line on any mistake.
    ``where`` prefixes the dotted keys (``reward`` when validating the reward section alone)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {type(data).__name__}")
    try:
        return cls.model_validate(data)  # type: ignore[attr-defined]
    except ValidationError as e:
        raise ConfigError(describe(e, cls, where)) from None
    except ConfigError as e:  # a section built inside a validator
        raise ConfigError(f"{where}: {e}" if where else str(e)) from None


def describe(error: ValidationError, cls: type, where: str = "") -> str:
    """pydantic's errors as one line: each names its dotted key and what the key accepts."""
    parts: list[str] = []
    unknown: dict[tuple, list[str]] = {}
    for err in error.errors(include_url=False):
        loc = tuple(err["loc"])
        if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            unknown.setdefault(loc[:-1], []).append(str(loc[-1]))
            continue
        parts.append(_one(err, loc, cls, where))
    for parent, keys in unknown.items():
        known = _fields_of(_type_at(cls, parent))
        name = _dotted(where, parent) or "the config"
        parts.insert(0, f"unknown keys in {name}: {sorted(keys)}; known: {known}")
    return "; ".join(dict.fromkeys(p.replace("\n", " ") for p in parts))


def _one(err: Any, loc: tuple, cls: type, where: str) -> str:
    key = _dotted(where, loc) or "config"
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    got = f", got {value!r}"
    if kind == "one_of":
        return f"{key} must be one of {ctx['choices']}{got}"
    if kind in ("literal_error", "enum"):
        return f"{key} must be one of {_literal_choices(cls, loc) or ctx.get('expected')}{got}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{key} must be {_range(cls, loc) or _bound(kind, ctx)}{got}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"{key}: expected int{got}"
    if kind in ("float_type", "float_parsing", "finite_number"):
        return f"{key}: expected a number{got}"
    if kind in ("bool_type", "bool_parsing"):
        return f"{key}: expected true/false{got}"
    if kind in ("string_type",):
        return f"{key}: expected text{got}"
    if kind in ("model_type", "model_attributes_type", "dict_type", "dataclass_type", "mapping_type"):
        return f"{key}: expected a mapping{got}"
    if kind in ("tuple_type", "list_type", "iterable_type"):
        return f"{key}: expected a list{got}"
    if kind in ("too_short", "too_long"):
        return f"{key}: {err['msg'][0].lower()}{err['msg'][1:]}{got}"
    if kind == "part_type":
        return f"{key}: {err['msg']}{got}"
    if kind == "missing":
        return f"{key}: required"
    msg = str(err["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if not loc and isinstance((ctx or {}).get("error"), ConfigError):
        return msg  # a whole-config check whose message names its keys already
    return f"{key}: {msg}"


def _dotted(where: str, loc: Iterable[Any]) -> str:
    out = where
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _unwrap(tp: Any) -> Any:
    """The section or dataclass inside ``X | None``, ``Annotated[X, …]``."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            inner = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(inner) != 1:
                return tp
            tp = inner[0]
        else:
            return tp


def _field_infos(tp: Any) -> dict[str, Any]:
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return dict(tp.model_fields)
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(tp)}
    return {}


def _fields_of(tp: Any) -> list[str]:
    return sorted(_field_infos(tp))


def _type_at(cls: Any, loc: tuple) -> Any:
    """The type the dotted ``loc`` names (sections and dataclasses walked by field name; indices skipped)."""
    tp: Any = cls
    for part in loc:
        if isinstance(part, int):
            args = typing.get_args(_unwrap(tp))
            tp = args[0] if args else Any
            continue
        info = _field_infos(tp).get(part)
        if info is None:
            return Any
        tp = info.annotation if isinstance(info, FieldInfo) else info
    return tp


def _field_at(cls: Any, loc: tuple) -> FieldInfo | None:
    if not loc or isinstance(loc[-1], int):
        return None
    info = _field_infos(_type_at(cls, loc[:-1])).get(loc[-1])
    return info if isinstance(info, FieldInfo) else None


def _literal_choices(cls: Any, loc: tuple) -> list[Any] | None:
    tp = _type_at(cls, loc)
    tp = _unwrap(tp)
    if typing.get_origin(tp) is typing.Literal:
        return list(typing.get_args(tp))
    return None


def _range(cls: Any, loc: tuple) -> str:
    info = _field_at(cls, loc)
    meta = list(info.metadata) if info is not None else []
    if info is not None and typing.get_origin(info.annotation) is Annotated:
        meta += list(typing.get_args(info.annotation)[1:])
    lo: tuple[str, Any] | None = None
    hi: tuple[str, Any] | None = None
    for m in meta:
        if isinstance(m, annotated_types.Ge):
            lo = ("[", m.ge)
        elif isinstance(m, annotated_types.Gt):
            lo = ("(", m.gt)
        elif isinstance(m, annotated_types.Le):
            hi = ("]", m.le)
        elif isinstance(m, annotated_types.Lt):
            hi = (")", m.lt)
        elif isinstance(m, annotated_types.Interval):
            lo = ("[", m.ge) if m.ge is not None else (("(", m.gt) if m.gt is not None else lo)
            hi = ("]", m.le) if m.le is not None else ((")", m.lt) if m.lt is not None else hi)
    if lo and hi:
        return f"in {lo[0]}{_num(lo[1])}, {_num(hi[1])}{hi[0]}"
    if lo:
        return f"{'>=' if lo[0] == '[' else '>'} {_num(lo[1])}"
    if hi:
        return f"{'<=' if hi[0] == ']' else '<'} {_num(hi[1])}"
    return ""


def _num(x: Any) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


def _bound(kind: str, ctx: Mapping[str, Any]) -> str:
    sign = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}[kind]
    return f"{sign} {_num(next(iter(ctx.values()), '?'))}"


def read_mapping(path: Path, what: str = "a recipe") -> dict[str, Any]:
    """The YAML mapping in ``path``; one :class:`ConfigError` line when it is not YAML or not a mapping."""
    import yaml

    try:
        tree = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not YAML: {' '.join(str(e).split())}") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: {what} must be a mapping")
    return tree


def set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """``tree[a][b][c] = value`` for ``a.b.c`` (missing sections made; a leaf in the way is one line)."""
    *parents, leaf = dotted.split(".")
    node = tree
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{dotted}: {p} is not a section")
    node[leaf] = value


def apply_overrides(tree: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Set each ``key.sub=value`` of ``overrides`` in ``tree`` (values parsed as YAML: ``8``, ``true``,
    ``[1, 8]``); a malformed override is one :class:`ConfigError` line. Every recipe (training loops, search)
    takes ``--set`` through this."""
    import yaml

    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r}: expected key.sub=value")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ConfigError(f"override {item!r}: the value is not YAML: {' '.join(str(e).split())}") from None
        set_dotted(tree, key.strip(), value)
    return tree
