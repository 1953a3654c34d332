"""Slices as a LangSmith dataset and experiment, offline against a fake endpoint on 127.0.0.1;
and the pytest route (``@pytest.mark.langsmith``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from agent_guards import EvidencePolicy
from agent_guards.evals import EvalPolicies, check, load_cases, run_kind
from agent_guards.evals.langsmith_io import export_dataset, run_experiment, to_examples
from tests.integration._fake_langsmith import FakeLangSmith, tracing_to

SLICE = [c for c in load_cases() if c.slice == "source_credibility"]


@pytest.fixture
def fake_langsmith() -> Iterator[FakeLangSmith]:
    with tracing_to(FakeLangSmith()) as server:
        yield server


def _client(server: FakeLangSmith):  # type: ignore[no-untyped-def]
    from langsmith import Client

    return Client(api_url=server.url, api_key="fake-key")


def scores(results: object) -> dict[str, int]:
    out = {}
    for row in results:  # type: ignore[attr-defined]
        feedback = row["evaluation_results"]["results"][0]
        out[row["example"].inputs["case_id"]] = feedback.score
    return out


def test_export_then_experiment(fake_langsmith: FakeLangSmith) -> None:
    client = _client(fake_langsmith)
    dataset = export_dataset(SLICE, "agent-guards/source_credibility", client=client)
    stored = fake_langsmith.examples[str(dataset.id)]
    assert len(stored) == len(SLICE)
    assert {e["inputs"]["case_id"] for e in stored} == {c.id for c in SLICE}
    assert stored[0]["outputs"]["expect"] == next(
        c.expect for c in SLICE if c.id == stored[0]["inputs"]["case_id"]
    )

    results = run_experiment("agent-guards/source_credibility", client=client)
    assert set(scores(results).values()) == {1}
    client.flush()
    session = next(iter(fake_langsmith.sessions.values()))
    assert (
        session["extra"]["metadata"]["agent_guards_policies"]["evidence_resolve"]
        == "EvidencePolicy@1"
    )
    assert b'"passed"' in fake_langsmith.payload()  # feedback key, uploaded

    broken = EvalPolicies(
        evidence=EvidencePolicy(source_weights={"forum": 9, "official": 1}, version=2)
    )
    results = run_experiment("agent-guards/source_credibility", client=client, policies=broken)
    failed = {case for case, score in scores(results).items() if score == 0}
    assert "sc-official-beats-newer-forum" in failed
    client.flush()


def test_export_errors() -> None:
    with pytest.raises(ValueError, match="dataset_name"):
        export_dataset(SLICE, " ", client=object())
    with pytest.raises(ValueError, match="no cases"):
        export_dataset([], "x", client=object())
    assert json.dumps(to_examples(SLICE), ensure_ascii=False)  # plain JSON, uploadable


# The pytest route: each case is one LangSmith-tracked test. Offline it runs as plain pytest
# (LANGSMITH_TEST_TRACKING=false, set in conftest); with a key it logs an experiment.
PERMISSION = [c for c in load_cases() if c.slice == "permission"]


@pytest.mark.langsmith
@pytest.mark.parametrize("case", PERMISSION, ids=[c.id for c in PERMISSION])
def test_permission_slice_tracked_by_langsmith(case: object) -> None:
    from langsmith import testing as t

    t.log_inputs({"case_id": case.id, "input": case.input})  # type: ignore[attr-defined]
    t.log_reference_outputs({"expect": case.expect})  # type: ignore[attr-defined]
    observed = run_kind(case.kind, case.input)  # type: ignore[attr-defined]
    t.log_outputs(observed)
    failures = check(case, observed)  # type: ignore[arg-type]
    t.log_feedback(key="passed", score=int(not failures))
    assert failures == []
