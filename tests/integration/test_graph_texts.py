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


def test_a_spent_budget_is_worded_for_the_user_and_keeps_its_code() -> None:
    from agent_guards import Budget

    scenario = SCENARIOS["procurement_threshold"]
    outcomes = {}
    for label, texts in (("en", None), ("zh", TEXTS_ZH)):
        policies = replace(scenario.policies, budget=Budget(max_steps=60, max_model_calls=3))
        if texts is not None:
            policies = replace(policies, texts=texts)
        graph = build_graph(scenario.script().model(), scenario.tools(), policies=policies,
                            checkpointer=InMemorySaver())  # fmt: skip
        config = scenario_config(scenario, label)
        outcomes[label] = graph.invoke({"messages": [("user", scenario.message)]}, config)[
            "outcome"
        ]
    for outcome in outcomes.values():
        assert outcome["route"] == "partial" and outcome["reason"] == "max_model_calls"
        assert "max_model_calls" not in outcome["text"]  # the code is for machines
    assert "I used 3 of 3 allowed model calls" in outcomes["en"]["text"]
    assert "模型调用次数已用 3，上限为 3" in outcomes["zh"]["text"]
    assert "Not used" not in outcomes["zh"]["text"]
