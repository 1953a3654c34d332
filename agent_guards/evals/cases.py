"""Eval cases and slices: JSONL files anyone can extend.

A case is one line of JSON::

    {"id": "cv-001", "slice": "conflicting_versions", "kind": "evidence",
     "input": {"items": [...]}, "expect": {"verdict": "answer", "selected_ids": ["d_new"]}}

``kind`` names the runner (see :mod:`agent_guards.evals.kinds`): ``evidence``, ``memory``,
``loop``, ``retry``, ``planner``, ``context`` or ``graph``. ``expect`` holds only what the
case pins down; every key present is checked (see :func:`check`).

Example:
    >>> case = Case.from_dict({"id": "x", "slice": "noise", "kind": "evidence",
    ...                        "input": {"items": []}, "expect": {"verdict": "abstain"}})
    >>> check(case, {"verdict": "abstain", "selected_ids": []})
    []
    >>> check(case, {"verdict": "answer"})
    ["verdict: expected 'abstain', got 'answer'"]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from agent_guards.core.errors import InvalidInputError

__all__ = ["SHIPPED_SLICES", "Case", "check", "load_cases", "shipped_case_files"]

SHIPPED_SLICES = (
    "conflicting_versions",
    "ambiguous_entity",
    "source_credibility",
    "basis_conflict",
    "noise",
    "no_evidence",
    "memory_override",
    "stale_memory",
    "planner_loop",
    "duplicate_tool_call",
    "alternating_tools",
    "retry_taxonomy",
    "permission",
)

# expect keys compared as sets of ids, and as upper bounds; other keys compare exactly
_ID_SETS = ("selected_ids", "conflicting_ids", "dropped_ids", "superseded_ids", "expired_ids")
# every other ``*_ids`` key compares as a set too (inject_ids, reused_ids, ...)
_BOUNDS = ("max_tool_calls", "max_model_calls", "max_steps", "max_executions")


@dataclass(frozen=True)
class Case:
    """One eval case: an input for a guard (or a graph scenario) and what must come out."""

    id: str
    slice: str
    kind: str
    input: dict[str, Any]
    expect: dict[str, Any]
    note: str = ""
    source: str = field(default="", compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "") -> Case:
        """Validate one JSON object; errors name the case id and the field."""
        item = str(data.get("id", "?"))
        for key in ("id", "slice", "kind"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise InvalidInputError(
                    f"must be a non-empty string ({source})", item=item, field=key
                )
        for key in ("input", "expect"):
            if not isinstance(data.get(key), Mapping):
                raise InvalidInputError(f"must be an object ({source})", item=item, field=key)
        unknown = sorted(set(data) - {"id", "slice", "kind", "input", "expect", "note"})
        if unknown:
            raise InvalidInputError(
                f"unknown keys {unknown} ({source})", item=item, field=unknown[0]
            )
        return cls(
            id=data["id"],
            slice=data["slice"],
            kind=data["kind"],
            input=dict(data["input"]),
            expect=dict(data["expect"]),
            note=str(data.get("note", "")),
            source=source,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of one JSONL line (``note`` only when set)."""
        out: dict[str, Any] = {"id": self.id, "slice": self.slice, "kind": self.kind}
        out |= {"input": self.input, "expect": self.expect}
        if self.note:
            out["note"] = self.note
        return out


def shipped_case_files() -> list[Path]:
    """The JSONL files of the slices that ship with agent-guards."""
    root = resources.files("agent_guards.evals") / "slices"
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".jsonl"))


def load_cases(paths: Iterable[str | Path] | None = None) -> list[Case]:
    """Load cases from JSONL files or folders of them (default: the shipped slices).

    Blank lines and lines starting with ``//`` are skipped. Duplicate case ids are an error.
    """
    files: list[Path] = []
    for p in paths if paths is not None else shipped_case_files():
        path = Path(p)
        files.extend(sorted(path.glob("*.jsonl")) if path.is_dir() else [path])
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for path in files:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("//"):
                continue
            where = f"{path.name}:{lineno}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as err:
                raise InvalidInputError(f"not valid JSON ({where}): {err.msg}") from err
            case = Case.from_dict(data, source=where)
            if case.id in seen:
                raise InvalidInputError(
                    f"duplicate case id (also at {seen[case.id]})", item=case.id, field="id"
                )
            seen[case.id] = where
            cases.append(case)
    return cases


def _norm(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _norm(v) for k, v in value.items()}
    return value


def check(case: Case, observed: Mapping[str, Any]) -> list[str]:
    """Compare what a run produced with what the case expects; return the differences.

    Every key in ``expect`` is checked against ``observed``:

    * ``*_ids`` keys (``selected_ids``, ``conflicting_ids``, ``dropped_ids``,
      ``superseded_ids``, ``expired_ids``, ``inject_ids``, ``reused_ids``) compare as sets;
    * ``selected_order`` compares ``selected_ids`` as an ordered list (citation order);
    * ``absent_ids``: none of these ids may appear anywhere in ``observed``;
    * ``max_*`` keys are upper bounds on the observed count of the same name
      (``max_tool_calls`` bounds ``tool_calls``);
    * ``<key>_in`` accepts any of several values of ``<key>`` (``verdict_in``, ``value_in``);
    * every other key compares exactly (after turning tuples into lists).
    """
    failures: list[str] = []
    for key, want in case.expect.items():
        failure = _check_key(key, want, observed)
        if failure is not None:
            failures.append(failure)
    return failures


def _check_key(key: str, want: Any, observed: Mapping[str, Any]) -> str | None:
    """The difference for one ``expect`` key (see :func:`check`), or None."""
    got = observed.get(key)
    if key in _ID_SETS or (key.endswith("_ids") and key != "absent_ids"):
        return _check_id_set(key, want, got)
    if key == "absent_ids":
        return _check_absent(want, observed)
    if key == "selected_order":
        return _check_order(want, observed)
    if key in _BOUNDS or key.startswith("max_"):
        return _check_bound(key, want, observed)
    if key.endswith("_in") and isinstance(want, list):
        return _check_one_of(key, want, observed)
    if _norm(got) != _norm(want):
        return f"{key}: expected {want!r}, got {got!r}"
    return None


def _check_id_set(key: str, want: Any, got: Any) -> str | None:
    if set(map(str, want)) != set(map(str, got or ())):
        return f"{key}: expected {sorted(want)}, got {sorted(got or ())}"
    return None


def _check_absent(want: Any, observed: Mapping[str, Any]) -> str | None:
    text = json.dumps(_norm(dict(observed)), ensure_ascii=False, default=str)
    leaked = [i for i in want if f'"{i}"' in text]
    if leaked:
        return f"absent_ids: {leaked} appear in the output"
    return None


def _check_order(want: Any, observed: Mapping[str, Any]) -> str | None:
    order = [str(g) for g in observed.get("selected_ids") or ()]
    if order != [str(w) for w in want]:
        return f"selected_order: expected {list(want)}, got {order}"
    return None


def _check_bound(key: str, want: Any, observed: Mapping[str, Any]) -> str | None:
    name = key[len("max_") :]
    got = observed.get(name, observed.get(key))
    if got is None or got > want:
        return f"{key[len('max_') :]}: expected at most {want}, got {got!r}"
    return None


def _check_one_of(key: str, want: list[Any], observed: Mapping[str, Any]) -> str | None:
    name = key[: -len("_in")]
    if _norm(observed.get(name)) not in _norm(want):
        return f"{name}: expected one of {want}, got {observed.get(name)!r}"
    return None
