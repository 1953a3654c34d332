"""The base every guard policy shares, and the validators its fields are checked with. Pure.

A policy is a frozen, keyword-only dataclass (``LoopPolicy``, ``Backoff``...) whose
``name@version`` label every decision records. :class:`Policy` gives it the label, the
``name``/``version`` checks and :meth:`Policy.coerce`, the check of the ``policy=``
argument that every guard entry point makes.

The ``check_*`` validators check one value each. ``where`` names the owner and the field
(``"LoopPolicy.stop_at"``; a plain argument is just its name) and starts the message, so
a bad value reads ``LoopPolicy.stop_at must be an int >= 2, got 1``. A value out of range
raises ``ValueError``; a value of the wrong type raises :class:`ConfigTypeError`, which is
both a ``TypeError`` and a ``ValueError``.

Example:
    >>> check_int("LoopPolicy.stop_at", 1, minimum=2)
    Traceback (most recent call last):
    ...
    ValueError: LoopPolicy.stop_at must be an int >= 2, got 1
    >>> check_duration("Backoff.max_delay", timedelta(minutes=1))
    60.0
    >>> check_ratio("PlannerPolicy.similarity_threshold", 2)
    Traceback (most recent call last):
    ...
    ValueError: PlannerPolicy.similarity_threshold must be in (0, 1], got 2
"""

from __future__ import annotations

import dataclasses
import math
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Literal, TypeVar, cast

__all__ = [
    "ConfigTypeError",
    "Policy",
    "check_bool",
    "check_duration",
    "check_int",
    "check_name",
    "check_number",
    "check_policy",
    "check_ratio",
    "duration_of",
    "is_int",
    "is_number",
]

P = TypeVar("P")
T = TypeVar("T")

Unit = Literal["seconds", "days"]

_UNIT_SECONDS: dict[str, float] = {"seconds": 1.0, "days": 86400.0}


def is_number(value: Any) -> bool:
    """True for an int or a float that is not a bool (NaN and infinities included).

    >>> is_number(1.5), is_number(float("nan")), is_number(True), is_number("1")
    (True, True, False, False)
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_int(value: Any, minimum: int | None = None) -> bool:
    """True for an int that is not a bool and is at least ``minimum`` (when given).

    >>> is_int(3, 1), is_int(0, 1), is_int(True), is_int(2.0)
    (True, False, False, False)
    """
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and (minimum is None or value >= minimum)
    )


def duration_of(value: Any, unit: Unit = "seconds") -> float | None:
    """A number of ``unit`` or a ``timedelta`` as a float number of ``unit`` (None: neither).

    The amount is not range-checked: it may be negative, NaN or infinite.

    >>> duration_of(timedelta(hours=36), "days"), duration_of(2), duration_of("2")
    (1.5, 2.0, None)
    """
    if isinstance(value, timedelta):
        return value.total_seconds() / _UNIT_SECONDS[unit]
    if not is_number(value):
        return None
    try:
        return float(value)
    except OverflowError:  # an int past float's range
        return math.inf if value > 0 else -math.inf


class ConfigTypeError(TypeError, ValueError):
    """A configuration value of the wrong type: both a ``TypeError`` and a ``ValueError``.

    A wrong type is a type error and an invalid value at once, so either ``except``
    clause catches it: callers that validate with ``except ValueError`` and callers that
    expect a ``TypeError`` for a wrong type both keep working.

    >>> try:
    ...     check_int("LoopPolicy.window", "50", minimum=2)
    ... except TypeError as err:
    ...     print(isinstance(err, ValueError), err)
    True LoopPolicy.window must be an int >= 2, got '50'
    """


def _require(where: str, need: str, value: Any, *, typed: bool, ok: bool = True) -> None:
    """ConfigTypeError unless ``typed``, ValueError unless ``ok``: ``<where> must be <need>``."""
    if typed and ok:
        return
    error = ValueError if typed else ConfigTypeError
    try:
        text = repr(value)
    except Exception:  # an int too long to print, a raising __repr__
        from agent_guards.core.fields import shown  # fields imports this module

        text = shown(value)
    raise error(f"{where} must be {need}, got {text}")


def check_int(where: str, value: T, *, minimum: int | None = None, optional: bool = False) -> T:
    """``value`` if it is an int (not a bool) of at least ``minimum``; None too if ``optional``.

    Example:
        >>> check_int("ContextPolicy.reserve_tokens", -1, minimum=0, optional=True)
        Traceback (most recent call last):
        ...
        ValueError: ContextPolicy.reserve_tokens must be an int >= 0 or None, got -1
        >>> check_int("nodes_per_step", 2, minimum=1)
        2
    """
    if value is None and optional:
        return value
    need = "an int" + ("" if minimum is None else f" >= {minimum}")
    need += " or None" if optional else ""
    _require(where, need, value, typed=is_int(value), ok=is_int(value, minimum))
    return value


def check_number(where: str, value: Any, *, minimum: float | None = None) -> float:
    """``value`` as a float if it is a finite int or float of at least ``minimum``.

    Example:
        >>> check_number("Backoff.factor", 0.5, minimum=1)
        Traceback (most recent call last):
        ...
        ValueError: Backoff.factor must be a number >= 1, got 0.5
        >>> check_number("EvidencePolicy.min_relevance", float("inf"))
        Traceback (most recent call last):
        ...
        ValueError: EvidencePolicy.min_relevance must be a finite number, got inf
    """
    need = "a finite number" if minimum is None else f"a number >= {minimum}"
    typed = is_number(value)
    ok = typed and math.isfinite(value) and (minimum is None or value >= minimum)
    _require(where, need, value, typed=typed, ok=ok)
    return float(value)


def check_ratio(where: str, value: Any, *, zero: bool = False, need: str = "") -> float:
    """``value`` as a float if it is a number in (0, 1], or in 0..1 with ``zero=True``.

    ``need`` rewords the requirement in the message (default ``in (0, 1]`` / ``in 0..1``).

    Example:
        >>> check_ratio("EvidencePolicy.close_confidence", 0, zero=True)
        0.0
        >>> check_ratio("ContextPolicy.warn_ratio", 0, need="a number in (0, 1]")
        Traceback (most recent call last):
        ...
        ValueError: ContextPolicy.warn_ratio must be a number in (0, 1], got 0
    """
    typed = is_number(value)
    ok = typed and (0 <= value <= 1 if zero else 0 < value <= 1)
    _require(where, need or ("in 0..1" if zero else "in (0, 1]"), value, typed=typed, ok=ok)
    return float(value)


def check_duration(
    where: str, value: Any, *, unit: Unit = "seconds", positive: bool = False
) -> float:
    """A number of ``unit`` or a ``timedelta``, as a finite float >= 0 (> 0 if ``positive``).

    Example:
        >>> check_duration("CircuitBreaker.cooldown", 0, positive=True)
        Traceback (most recent call last):
        ...
        ValueError: CircuitBreaker.cooldown must be seconds > 0 or a timedelta, got 0
        >>> check_duration("EvidencePolicy.close_days", timedelta(days=30), unit="days")
        30.0
    """
    amount = duration_of(value, unit)
    need = f"{unit} {'>' if positive else '>='} 0 or a timedelta"
    ok = amount is not None and math.isfinite(amount) and (amount > 0 if positive else amount >= 0)
    _require(where, need, value, typed=amount is not None, ok=ok)
    return amount or 0.0  # never None here: _require raised


def check_bool(where: str, value: Any) -> bool:
    """``value`` if it is a bool.

    >>> check_bool("ContextPolicy.pin_last_human", "yes")
    Traceback (most recent call last):
    ...
    agent_guards.core.policy.ConfigTypeError: ContextPolicy.pin_last_human must be a bool, got 'yes'
    """
    _require(where, "a bool", value, typed=isinstance(value, bool))
    return bool(value)


def check_name(where: str, value: Any) -> str:
    """``value`` if it is a non-empty string.

    >>> check_name("MemoryPolicy.name", "")
    Traceback (most recent call last):
    ...
    ValueError: MemoryPolicy.name must be a non-empty string, got ''
    """
    _require(where, "a non-empty string", value, typed=isinstance(value, str), ok=bool(value))
    return str(value)


def check_policy(value: object, cls: type[P], *, default: P | None = None) -> P:
    """A guard's ``policy=`` argument: ``default`` (else ``cls()``) for None, else a ``cls``.

    Raises:
        TypeError: ``value`` is neither None nor an instance of ``cls``.

    Example:
        >>> from agent_guards.loop_check import LoopPolicy
        >>> check_policy(None, LoopPolicy).label
        'LoopPolicy@1'
        >>> check_policy({"stop_at": 3}, LoopPolicy)
        Traceback (most recent call last):
        ...
        TypeError: policy must be a LoopPolicy, got dict
    """
    if value is None:
        return cls() if default is None else default
    if isinstance(value, cls):
        return value
    article = "an" if cls.__name__[:1].lower() in tuple("aeiou") else "a"
    raise TypeError(f"policy must be {article} {cls.__name__}, got {type(value).__name__}")


PolicyT = TypeVar("PolicyT", bound="Policy")


def _rebuild(cls: type[PolicyT], state: dict[str, Any]) -> PolicyT:
    """Unpickle a policy: build it again from its fields (validation included)."""
    return cls(**state)


class Policy:
    """Base of the guard policies: frozen, keyword-only dataclasses labelled ``name@version``.

    A subclass declares ``name`` (default: its class name) and ``version`` (default 1) as
    its last fields, so ``dataclasses.fields`` keeps listing them last, and calls
    :meth:`check_label` from ``__post_init__``. The base adds no field and no state, so
    ``dataclasses.replace`` and checkpoint serialization see only the subclass's fields;
    pickling and copying rebuild the policy through its constructor, so the read-only
    mappings policies hold (``MappingProxyType``) survive them.

    Example:
        >>> from dataclasses import dataclass, replace
        >>> @dataclass(frozen=True, kw_only=True)
        ... class RatePolicy(Policy):
        ...     per_minute: int = 60
        ...     name: str = "RatePolicy"
        ...     version: int = 1
        ...
        ...     def __post_init__(self) -> None:
        ...         check_int("RatePolicy.per_minute", self.per_minute, minimum=1)
        ...         self.check_label()
        >>> RatePolicy().label, replace(RatePolicy(), version=2).label
        ('RatePolicy@1', 'RatePolicy@2')
        >>> import copy
        >>> RatePolicy.coerce(None) == copy.deepcopy(RatePolicy())
        True
        >>> RatePolicy(version=0)
        Traceback (most recent call last):
        ...
        ValueError: RatePolicy.version must be an int >= 1, got 0
    """

    name: str
    version: int

    @property
    def label(self) -> str:
        """``name@version``: what decisions record (``"LoopPolicy@1"``)."""
        return f"{self.name}@{self.version}"

    @classmethod
    def coerce(cls: type[PolicyT], value: object, *, default: PolicyT | None = None) -> PolicyT:
        """:func:`check_policy` for this class: None gives ``default`` (else ``cls()``)."""
        return check_policy(value, cls, default=default)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle (and copy) through the constructor; read-only mappings travel as dicts."""
        state: dict[str, Any] = {}
        for f in dataclasses.fields(cast(Any, self)):
            if f.init:
                value = getattr(self, f.name)
                state[f.name] = dict(value) if isinstance(value, MappingProxyType) else value
        return (_rebuild, (type(self), state))

    def check_label(self) -> None:
        """Check ``name`` (a non-empty string) and ``version`` (an int >= 1)."""
        owner = type(self).__name__
        check_name(f"{owner}.name", self.name)
        check_int(f"{owner}.version", self.version, minimum=1)
