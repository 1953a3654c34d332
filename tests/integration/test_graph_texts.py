"""The reference graph words what the user reads with ``Policies(texts=...)``."""

from __future__ import annotations

from dataclasses import replace

from langgraph.checkpoint.memory import InMemorySaver

from agent_guards.core.texts import TEXTS_ZH
from agent_guards.graphs.plan_execute import build_graph
from agent_guards.graphs.scenarios import SCENARIOS, scenario_config


def _refused(texts: object = None) -> dict[str, object]:
    scenario = SCENARIOS["permission_denied"]
    policies = scenario.policies if texts is None else replace(scenario.policies, texts=texts)
    graph = build_graph(scenario.script().model(), scenario.tools(), policies=policies,
                        checkpointer=InMemorySaver())  # fmt: skip
    config = scenario_config(scenario, "t")
    return dict(graph.invoke({"messages": [("user", scenario.message)]}, config)["outcome"])


def test_chinese_texts_word_the_refusal_and_keep_the_codes() -> None:
    english, chinese = _refused(), _refused(TEXTS_ZH)
    assert english["route"] == chinese["route"] == "refuse"
    assert english["reason"] == chinese["reason"]  # the code stays for machines
    assert str(chinese["text"]).startswith("这个请求我无法完成")
    assert "retry_router" not in str(chinese["text"])
    assert not str(english["text"]).startswith("这个")
