"""Slices as a LangSmith dataset, and the eval as a LangSmith experiment.

:func:`export_dataset` uploads cases as examples (``inputs``: the case id, slice, kind and
input; reference ``outputs``: ``expect``; ``metadata``: slice, kind, note). :func:`run_experiment`
runs ``langsmith.evaluate`` over a dataset (or over cases directly): the target feeds each
example to its guard (:func:`case_target`), the evaluator applies
:func:`~agent_guards.evals.cases.check` (:func:`case_evaluator`, feedback key ``passed``),
and the experiment's metadata records the policy versions, so LangSmith can compare two
experiments case by case. ``langsmith`` is imported only when these are called.

Needs ``LANGSMITH_API_KEY`` (and ``LANGSMITH_ENDPOINT`` for a self-hosted instance), or a
``langsmith.Client`` passed as ``client=``.

Example:
    >>> from agent_guards.evals import load_cases
    >>> example = to_examples(load_cases())[0]
    >>> sorted(example), sorted(example["inputs"])
    (['inputs', 'metadata', 'reference_outputs'], ['case_id', 'input', 'kind', 'slice'])
    >>> target = case_target()
    >>> outputs = target(example["inputs"])
    >>> case_evaluator(example["inputs"], outputs, example["reference_outputs"])["score"]
    1
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agent_guards.evals.cases import Case, check
from agent_guards.evals.kinds import policy_versions, run_kind
from agent_guards.evals.policies import EvalPolicies

__all__ = ["case_evaluator", "case_target", "export_dataset", "run_experiment", "to_examples"]


def to_examples(cases: Iterable[Case]) -> list[dict[str, Any]]:
    """LangSmith example dicts (``inputs``, ``reference_outputs``, ``metadata``) for ``cases``."""
    return [
        {
            "inputs": {"case_id": c.id, "slice": c.slice, "kind": c.kind, "input": c.input},
            "reference_outputs": {"expect": c.expect},
            "metadata": {"slice": c.slice, "kind": c.kind, "note": c.note},
        }
        for c in cases
    ]


def _client(client: Any) -> Any:
    if client is not None:
        return client
    import langsmith

    return langsmith.Client()


def export_dataset(
    cases: Iterable[Case],
    dataset_name: str,
    *,
    client: Any = None,
    description: str | None = None,
) -> Any:
    """Create ``dataset_name`` in LangSmith with one example per case; returns the dataset.

    Raises:
        ValueError: ``dataset_name`` is empty or there are no cases.
    """
    if not isinstance(dataset_name, str) or not dataset_name.strip():
        raise ValueError(f"dataset_name must be a non-empty string, got {dataset_name!r}")
    examples = to_examples(cases)
    if not examples:
        raise ValueError("no cases to export")
    ls = _client(client)
    slices = sorted({e["inputs"]["slice"] for e in examples})
    dataset = ls.create_dataset(
        dataset_name,
        description=description or f"agent-guards eval slices: {', '.join(slices)}",
        metadata={"source": "agent-guards", "slices": slices},
    )
    ls.create_examples(dataset_id=dataset.id, examples=examples)
    return dataset


def case_target(
    policies: EvalPolicies | None = None,
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """The experiment's target: an example's ``inputs`` -> what the guard did.

    A malformed case gives ``{"error": ...}`` (the evaluator fails it), never an exception.
    """

    def target(inputs: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return run_kind(str(inputs["kind"]), dict(inputs["input"]), policies=policies)
        except (ValueError, TypeError, KeyError) as err:
            return {"error": f"{type(err).__name__}: {err}"}

    return target


def case_evaluator(
    inputs: Mapping[str, Any], outputs: Mapping[str, Any], reference_outputs: Mapping[str, Any]
) -> dict[str, Any]:
    """Feedback ``passed`` (1 or 0) with the differences :func:`check` found as the comment."""
    if "error" in outputs:
        failures = [str(outputs["error"])]
    else:
        case = Case(
            id=str(inputs.get("case_id", "?")),
            slice=str(inputs.get("slice", "?")),
            kind=str(inputs.get("kind", "?")),
            input=dict(inputs.get("input") or {}),
            expect=dict(reference_outputs.get("expect") or {}),
        )
        failures = check(case, outputs)
    return {"key": "passed", "score": int(not failures), "comment": "; ".join(failures) or "ok"}


def run_experiment(
    dataset_name: str,
    *,
    client: Any = None,
    policies: EvalPolicies | None = None,
    experiment_prefix: str = "agent-guards",
    max_concurrency: int = 0,
    **kwargs: Any,
) -> Any:
    """Run the eval over a LangSmith dataset as an experiment (``langsmith.evaluate``).

    Args:
        dataset_name: A dataset made by :func:`export_dataset` (or any dataset whose
            examples have the same shape).
        client: A ``langsmith.Client`` (default: one from the environment).
        policies: The policies the guards run under; their versions go to the experiment's
            metadata (``agent_guards_policies``).
        experiment_prefix: Name prefix of the experiment.
        max_concurrency: Passed to ``evaluate`` (0: run in this thread).
        **kwargs: Passed to ``langsmith.evaluate``.

    Returns:
        The ``ExperimentResults`` (one row per example, with the ``passed`` feedback).
    """
    from langsmith import evaluate

    if not isinstance(dataset_name, str) or not dataset_name.strip():
        raise ValueError(f"dataset_name must be a non-empty string, got {dataset_name!r}")
    return evaluate(
        case_target(policies),
        data=dataset_name,
        evaluators=[case_evaluator],
        experiment_prefix=experiment_prefix,
        metadata={"agent_guards_policies": policy_versions(policies)},
        max_concurrency=max_concurrency,
        client=_client(client),
        **kwargs,
    )
