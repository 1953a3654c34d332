"""The reference graph's ``Policies`` refuses a value of the wrong kind when it is built,
naming the field and what to pass (a dict where a policy belongs would otherwise fail
deep inside a run, or not at all)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_guards import Budget, LoopPolicy
from agent_guards.graphs.plan_execute import Policies


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("loop", {"window": 5}, r"Policies.loop must be a LoopPolicy, got dict: Policies\(loop=Lo"),
        ("budget", 40, "Policies.budget must be a Budget, got int"),
        ("retry", LoopPolicy(), "Policies.retry must be a RetryRouterPolicy, got LoopPolicy"),
        ("breaker", "on", "Policies.breaker must be a CircuitBreaker or None, got str"),
        ("texts", "zh", "Policies.texts must be a Texts"),
        ("guards", "no", "Policies.guards must be a bool"),
        ("max_context_tokens", "16k", "max_context_tokens must be an int"),
        ("approval_risk", "critical", "approval_risk must be 'low', 'medium', 'high' or None"),
        ("stop_request", "stop", "stop_request must be callable or None"),
        ("required_constraints", "region", "required_constraints must be constraint names"),
    ],
)
def test_a_field_of_the_wrong_kind_is_refused_naming_it(
    field: str, value: Any, message: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        Policies(**{field: value})


def test_good_values_are_kept_and_a_list_of_constraints_becomes_a_tuple() -> None:
    policies = Policies(budget=Budget(max_steps=10), breaker=None, required_constraints=["region"])
    assert policies.required_constraints == ("region",) and policies.breaker is None
