"""The savings benchmark measures real runs: every figure in a row is what a watcher of the
same run counts (callbacks on the model and the tools), the healthy runs complete under
agent-guards, and the long conversation keeps its constraints and its tool-call pairs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from benchmarks import bench_savings as savings
from benchmarks.run import MATRIX_END, MATRIX_START, README_END, README_START, main


class Watcher(BaseCallbackHandler):
    """Counts what the run did, independently of the benchmark's own counters."""

    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []
        self.tool_starts = 0
        self.plan_writes = 0

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.prompts.extend(list(batch) for batch in messages)

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        if (serialized or {}).get("name") == "write_todos":
            self.plan_writes += 1
        else:
            self.tool_starts += 1


CASES = [
    (make, variant)
    for make in savings.scenarios(quick=True)
    for variant in (savings.CONTEXT_VARIANTS if make().context else savings.VARIANTS)
]


@pytest.mark.parametrize(("make", "variant"), CASES, ids=[f"{m().name}/{v}" for m, v in CASES])
def test_each_figure_is_what_the_run_did(make: Any, variant: str) -> None:
    watcher = Watcher()
    result = savings.run_case(make(), variant, window=savings.QUICK_WINDOW, callbacks=[watcher])
    assert result.tool_executions == watcher.tool_starts
    assert result.plans_written == watcher.plan_writes
    assert result.model_calls == len(watcher.prompts) + result.summary_calls
    own = sum(savings.prompt_tokens(p) for p in watcher.prompts)
    # A summary call's prompt is the summarizer's, which the model's callbacks do not see.
    assert (result.tokens == own) if result.summary_calls == 0 else (result.tokens > own)
    assert result.tokens > 0 and result.model_calls >= 1


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return savings.run(quick=True)


def _row(rows: list[dict[str, Any]], scenario: str, variant: str) -> dict[str, Any]:
    return next(r for r in rows if r["scenario"].startswith(scenario) and r["variant"] == variant)


def test_healthy_runs_complete_under_agent_guards_and_langchain_cuts_them(
    rows: list[dict[str, Any]],
) -> None:
    small, large, _ = savings.SIZES[True]
    for n in (small, large):
        guarded = _row(rows, f"healthy, {n} ", "agent-guards")
        assert guarded["completed"] and guarded["tool_executions"] == n
        assert guarded["model_calls"] == n + 1
        unguarded = _row(rows, f"healthy, {n} ", "no guard")
        assert unguarded["completed"] and unguarded["tool_executions"] == n
    cut = _row(rows, f"healthy, {large} ", "langchain")
    assert not cut["completed"] and cut["model_calls"] == 5  # ModelCallLimitMiddleware run_limit


def test_loops_end_at_the_limit_unguarded_and_early_under_agent_guards(
    rows: list[dict[str, Any]],
) -> None:
    for scenario in ("identical-call loop", "alternating loop", "planner replanning"):
        unguarded = _row(rows, scenario, "no guard")
        guarded = _row(rows, scenario, "agent-guards")
        assert unguarded["outcome"].startswith("GraphRecursionError")
        assert guarded["outcome"].startswith("stopped: ")
        assert guarded["model_calls"] < unguarded["model_calls"]
        assert guarded["tokens"] < unguarded["tokens"]
    permission = _row(rows, "permission error", "agent-guards")
    assert permission["tool_executions"] == 1 and "permission" in permission["outcome"]


def test_the_long_conversation_keeps_constraints_and_pairs_under_agent_guards(
    rows: list[dict[str, Any]],
) -> None:
    guarded = _row(rows, "long Chinese conversation", "agent-guards")
    assert guarded["constraint_kept"] and guarded["pairs_intact"] and guarded["fits_window"]
    assert guarded["turns_answered"] == savings.SIZES[True][2]
    unguarded = _row(rows, "long Chinese conversation", "no guard")
    assert not unguarded["fits_window"]  # the scenario does overflow the window
    assert guarded["tokens"] < unguarded["tokens"]


def test_the_checks_can_fail() -> None:
    call = AIMessage("", tool_calls=[{"name": "search", "args": {}, "id": "c1"}])
    answer = ToolMessage("x", tool_call_id="c1")
    assert savings.pairs_intact([HumanMessage("q"), call, answer])
    assert not savings.pairs_intact([HumanMessage("q"), answer])
    assert not savings.pairs_intact([HumanMessage("q"), call])
    result = savings.run_case(savings.long_conversation(3), "no guard")
    assert savings.constraint_kept(result)
    result.prompts[-1] = result.prompts[-1][-2:]
    assert not savings.constraint_kept(result)


def test_the_matrix_reaches_the_json_and_the_readme(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        f"a\n{README_START}\nold\n{README_END}\nb\n{MATRIX_START}\nold matrix\n{MATRIX_END}\nc\n"
    )
    out = tmp_path / "bench.json"
    assert main(["--quick", "--only", "savings", "--json", str(out), "--readme", str(readme)]) == 0
    payload = json.loads(out.read_text())
    matrix = [r["matrix"] for r in payload["rows"] if r["topic"] == "savings"]
    assert {m["variant"] for m in matrix} >= set(savings.CONTEXT_VARIANTS)
    text = readme.read_text()
    assert "old matrix" not in text and text.endswith("c\n")
    first = matrix[0]
    assert f"| {first['scenario']} | {first['variant']} | {first['model calls']:,} |" in text
