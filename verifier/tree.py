"""Walk nested results leaf by leaf, with printable paths.

Containers are sequences (tuples, lists, namedtuples) matched by position and mappings
(dicts, transformers ModelOutput, dataclasses) matched by key or field name. Everything
else is a leaf: tensors, numbers, bools, None, strings, other objects.

Paths render as Python expressions: `output[2]['logits']`, or, when the result's top is a
mapping with identifier keys, the bare key first: `loss`, `gradients['layers.0.weight']`.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional

ROOT_NAME = "output"


@dataclass(frozen=True)
class Step:
    """One step down a container: by position, by mapping key or by dataclass field."""

    kind: str  # "index", "key" or "attr"
    key: Any

    def render(self, first: bool) -> str:
        if self.kind in ("key", "attr") and first and _is_identifier(self.key):
            return str(self.key)
        if self.kind == "attr":
            return f".{self.key}"
        return f"[{self.key!r}]"


Path = tuple[Step, ...]


def _is_identifier(key: Any) -> bool:
    return isinstance(key, str) and key.isidentifier()


def render_path(path: Path) -> str:
    """The path as a readable expression (see module docstring)."""
    if not path:
        return ROOT_NAME
    head = path[0].render(first=True)
    if head.startswith("[") or head.startswith("."):
        head = ROOT_NAME + head
    return head + "".join(step.render(first=False) for step in path[1:])


class StructureMismatch(ValueError):
    """Two results whose containers differ (keys, lengths or kinds) at `path`."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{render_path(path)}: {message}")
        self.path = path
        self.message = message


def is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _is_dataclass_instance(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def container_kind(value: Any) -> Optional[str]:
    """"sequence", "mapping" or None for a leaf."""
    if isinstance(value, (tuple, list)):
        return "sequence"
    if isinstance(value, dict) or _is_dataclass_instance(value):
        return "mapping"
    return None


def children(value: Any) -> list[tuple[Step, Any]]:
    """The direct children of a container, in order (a leaf has none).

    ModelOutput's items() leaves out fields that are None, like the class itself does.
    """
    if isinstance(value, (tuple, list)):
        return [(Step("index", i), item) for i, item in enumerate(value)]
    if isinstance(value, dict):
        return [(Step("key", k), v) for k, v in value.items()]
    if _is_dataclass_instance(value):
        return [(Step("attr", f.name), getattr(value, f.name)) for f in dataclasses.fields(value)]
    return []


def describe_kind(value: Any) -> str:
    """A short name of what a value is, for messages."""
    kind = container_kind(value)
    if kind == "sequence":
        return f"{type(value).__name__} of {len(value)}"
    if kind == "mapping":
        return type(value).__name__
    if value is None:
        return "None"
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is not None and shape is not None:
        return f"{type(value).__name__}[{str(dtype).replace('torch.', '')}, {tuple(shape)}]"
    return type(value).__name__


def flatten(value: Any, prefix: Path = ()) -> list[tuple[Path, Any]]:
    """Every leaf of a nested value with its path, depth first, in container order."""
    return list(_iter_leaves(value, prefix))


def _iter_leaves(value: Any, prefix: Path) -> Iterator[tuple[Path, Any]]:
    if container_kind(value) is None:
        yield prefix, value
        return
    for step, child in children(value):
        yield from _iter_leaves(child, prefix + (step,))


def zip_leaves(
    reference: Any, other: Any, names: tuple[str, str] = ("eager", "experiment"),
    only_fields: Optional[Mapping[str, tuple[str, ...]]] = None,
) -> list[tuple[Path, Any, Any]]:
    """Pairs of corresponding leaves of two results.

    Raises StructureMismatch at the first place the containers differ. Sequences match by
    position (a list matches a tuple), mappings and dataclasses by key; a key that is None
    on one side and absent on the other is ignored (ModelOutput drops None fields).
    `only_fields`: for a mapping of `reference` whose type is named there, only those
    fields are paired (on both sides).
    """
    pairs: list[tuple[Path, Any, Any]] = []
    _zip(reference, other, (), names, pairs, only_fields or {})
    return pairs


def _zip(ref: Any, oth: Any, path: Path, names: tuple[str, str], out: list,
         only_fields: Mapping[str, tuple[str, ...]]) -> None:
    ref_kind, oth_kind = container_kind(ref), container_kind(oth)
    if ref_kind != oth_kind:
        if ref_kind is None and oth_kind is None:
            out.append((path, ref, oth))
            return
        raise StructureMismatch(
            path, f"{names[1]} returned {describe_kind(oth)} where {names[0]} returned "
                  f"{describe_kind(ref)}")
    if ref_kind is None:
        out.append((path, ref, oth))
        return
    if ref_kind == "sequence":
        if len(ref) != len(oth):
            raise StructureMismatch(
                path, f"{names[1]} returned {describe_kind(oth)} items where {names[0]} "
                      f"returned {describe_kind(ref)}")
        for (step, r), (_, o) in zip(children(ref), children(oth)):
            _zip(r, o, path + (step,), names, out, only_fields)
        return
    ref_children = dict((step.key, (step, v)) for step, v in children(ref))
    oth_children = dict((step.key, (step, v)) for step, v in children(oth))
    kept = only_fields.get(type(ref).__name__)
    if kept is not None:
        ref_children = {k: v for k, v in ref_children.items() if k in kept}
        oth_children = {k: v for k, v in oth_children.items() if k in kept}
    missing = [k for k in ref_children if k not in oth_children and ref_children[k][1] is not None]
    extra = [k for k in oth_children if k not in ref_children and oth_children[k][1] is not None]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"{names[1]} lacks keys {missing!r}")
        if extra:
            parts.append(f"{names[1]} has extra keys {extra!r}")
        raise StructureMismatch(path, f"{'; '.join(parts)} (compared with {names[0]})")
    for key, (step, r) in ref_children.items():
        if key not in oth_children:
            continue
        _zip(r, oth_children[key][1], path + (step,), names, out, only_fields)


def get_leaf(value: Any, path: Path) -> Any:
    """The value at `path`."""
    for step in path:
        if step.kind == "attr":
            value = getattr(value, step.key)
        else:
            value = value[step.key]
    return value


def replace_leaf(value: Any, path: Path, new: Any) -> Any:
    """A copy of `value` with the value at `path` replaced (containers are rebuilt)."""
    if not path:
        return new
    step, rest = path[0], path[1:]
    if step.kind == "attr":
        child = replace_leaf(getattr(value, step.key), rest, new)
        try:
            return dataclasses.replace(value, **{step.key: child})
        except (TypeError, ValueError):
            rebuilt = copy.copy(value)
            object.__setattr__(rebuilt, step.key, child)
            return rebuilt
    child = replace_leaf(value[step.key], rest, new)
    if isinstance(value, list):
        rebuilt_list = list(value)
        rebuilt_list[step.key] = child
        return type(value)(rebuilt_list) if type(value) is not list else rebuilt_list
    if isinstance(value, tuple):
        items = list(value)
        items[step.key] = child
        return type(value)(*items) if is_namedtuple(value) else type(value)(items)
    rebuilt = copy.copy(value)
    rebuilt[step.key] = child
    return rebuilt


def find_path(value: Any, rendered: str) -> Path:
    """The leaf path of `value` written as `rendered`; ValueError listing the leaves if none.

    Accepts the rendering of `render_path` and the all-brackets form (`['logits']`, `[2]`,
    `output[2]`, `['gradients']['layers.0.weight']`).
    """
    leaves = flatten(value)
    wanted = rendered.strip()
    for path, _ in leaves:
        bracketed = "".join(step.render(first=False) for step in path)
        if wanted in (render_path(path), bracketed, ROOT_NAME + bracketed):
            return path
    available = ", ".join(render_path(p) for p, _ in leaves[:50])
    raise ValueError(f"no leaf at path {rendered!r}; the result's leaves are: {available}")
