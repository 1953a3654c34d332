"""evidence_resolve for ``langchain.agents.create_agent``: EvidenceResolveMiddleware."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.runtime import Runtime

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.signatures import content_text, is_guard_message
from agent_guards.core.texts import TEXTS_EN, Texts
from agent_guards.evidence_resolve.core import resolve_evidence
from agent_guards.evidence_resolve.messages import evidence_read_again
from agent_guards.evidence_resolve.model import EvidenceVerdict
from agent_guards.evidence_resolve.policy import EvidencePolicy
from agent_guards.middleware.state import GuardAgentState

__all__ = ["EvidenceResolveMiddleware"]

GUARD = "evidence_resolve"
_ENDING = (Verdict.CLARIFY, Verdict.ABSTAIN, Verdict.ESCALATE)


def _config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # a direct call outside a graph
        return {}


def _turn(messages: list[Any]) -> list[Any]:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, HumanMessage) and not is_guard_message(m):
            return messages[i + 1 :]
    return messages


def _tool_name(tool: Any) -> str:
    """A model request's tool's name: a ``BaseTool``, or a dict tool (OpenAI's function
    format or a name of its own); "" for a provider's built-in tool without one."""
    if isinstance(tool, BaseTool):
        return tool.name
    if isinstance(tool, Mapping):
        function = tool.get("function")
        name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        return name if isinstance(name, str) else ""
    return str(getattr(tool, "__name__", ""))


def _note(verdict: EvidenceVerdict) -> str:
    """What the model reads before answering: the arbitrated value(s) and what lost."""
    claims: Mapping[str, Any] = verdict.claims or {verdict.claim_key or "answer": verdict}
    lines = ["Evidence check (sources arbitrated by policy; answer from these, cite the ids):"]
    for key, claim in claims.items():
        chosen = ", ".join(claim.selected_ids) or "none"
        line = f"- {key}: {claim.value!r} (from {chosen})"
        if claim.conflicting_ids:
            line += f"; outranked: {', '.join(claim.conflicting_ids)}"
        lines.append(line)
    if verdict.dropped_ids:
        lines.append(f"Set aside (do not use): {', '.join(verdict.dropped_ids)}.")
    return "\n".join(lines)


class EvidenceResolveMiddleware(AgentMiddleware[GuardAgentState, Any, Any]):
    """evidence_resolve for ``create_agent``: arbitrate retrieval results before the answer.

    Retrieval tools return their evidence as the tool artifact (``Evidence``, evidence
    dicts or ``Document``s; ``response_format="content_and_artifact"``). After they ran,
    ``before_model`` resolves the turn's evidence (principal from
    ``config["configurable"][principal_key]``) and logs the decision; CLARIFY, ABSTAIN and
    ESCALATE end the run with the reason instead of letting the model pick a source.
    ``wrap_model_call`` tells the model which value each claim has and which items lost.

    Args:
        tools: The retrieval tools whose results are evidence, or their names (required:
            no tool is trusted as a source by default). A name the model is not offered
            fails the first model call, before any tool runs.
        policy: Source weights and thresholds (default :class:`EvidencePolicy`).
        principal_key: The ``configurable`` key with the caller's identities.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_core.tools import tool
        >>> from agent_guards.middleware import EvidenceResolveMiddleware
        >>> from agent_guards.testing import ScriptedChatModel, tool_call_message
        >>> @tool(response_format="content_and_artifact")
        ... def search_docs(q: str):
        ...     '''Search the policy documents.'''
        ...     docs = [{"id": "wiki", "claim_key": "limit", "value": "30w",
        ...              "source_type": "forum"},
        ...             {"id": "pol-7", "claim_key": "limit", "value": "50w",
        ...              "source_type": "official"}]
        ...     return "2 documents", docs
        >>> model = ScriptedChatModel(script=[tool_call_message("search_docs", {"q": "limit"}),
        ...                                   "The limit is 50w [pol-7]."])
        >>> agent = create_agent(model, tools=[search_docs],
        ...                      middleware=[EvidenceResolveMiddleware(tools=[search_docs])])
        >>> out = agent.invoke({"messages": [("user", "limit?")]})
        >>> out["guard_log"][0].verdict.value, out["guard_log"][0].selected_ids
        ('answer', ('pol-7',))
        >>> print(model.calls[1][0].content)
        Evidence check (sources arbitrated by policy; answer from these, cite the ids):
        - limit: '50w' (from pol-7); outranked: wiki
        >>> EvidenceResolveMiddleware(tools=[])
        Traceback (most recent call last):
        ...
        ValueError: EvidenceResolveMiddleware.tools must name the retrieval tools, got []
        >>> typo = create_agent(model, tools=[search_docs],
        ...                     middleware=[EvidenceResolveMiddleware(tools=["search_doc"])])
        >>> try:
        ...     typo.invoke({"messages": [("user", "limit?")]})
        ... except ValueError as err:
        ...     print(str(err).split(" (")[0])
        EvidenceResolveMiddleware.tools names ['search_doc'], which the model is not offered
    """

    state_schema = GuardAgentState

    def __init__(
        self,
        *,
        tools: Iterable[str | BaseTool] | str | BaseTool,
        policy: EvidencePolicy | None = None,
        principal_key: str = "principal",
        texts: Texts = TEXTS_EN,
    ) -> None:
        super().__init__()
        if not isinstance(texts, Texts):
            raise TypeError(f"EvidenceResolveMiddleware.texts must be a Texts, got {texts!r}")
        self.texts = texts
        given = [tools] if isinstance(tools, str | BaseTool) else list(tools)
        names = [t.name if isinstance(t, BaseTool) else t for t in given]
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(
                f"EvidenceResolveMiddleware.tools must name the retrieval tools, got {names!r}"
            )
        if policy is not None and not isinstance(policy, EvidencePolicy):
            raise TypeError(
                f"policy must be an EvidencePolicy or None, got {type(policy).__name__}"
            )
        self.sources = frozenset(names)
        self.policy = policy
        self.principal_key = principal_key

    def _resolve(
        self, messages: list[Any], config: RunnableConfig
    ) -> EvidenceVerdict | GuardDecision | None:
        """The turn's verdict; a decision when the evidence is malformed; None without any."""
        principal = ((config or {}).get("configurable") or {}).get(self.principal_key)
        try:
            items = evidence_read_again(_turn(messages), self.sources)
            if not items:
                return None
            return resolve_evidence(items, policy=self.policy, principal=principal)
        except InvalidInputError as err:
            label = self.policy.label if self.policy is not None else ""
            return _node.invalid_input(GUARD, err, policy=label)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: GuardAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """After retrieval: log the decision; end on clarify / abstain / escalate."""
        messages = list(state.get("messages") or ())
        last = messages[-1] if messages else None
        if not isinstance(last, ToolMessage) or last.name not in self.sources:
            return None
        config = _config()
        found = self._resolve(messages, config)
        if found is None:
            return None
        decision = found if isinstance(found, GuardDecision) else found.decision
        decision = _node.stamp(decision, config)
        if decision.verdict not in _ENDING:
            return {"guard_log": [decision]}
        final = AIMessage(
            content=self._ending_text(found, decision),
            name=GUARD,
            response_metadata={"agent_guards": {"guard": GUARD, "reason": decision.reason}},
        )
        return {"messages": [final], "guard_log": [decision], "jump_to": "end"}

    def _ending_text(self, found: Any, decision: GuardDecision) -> str:
        """What the user reads when the run ends here (the reason stays in the decision)."""
        if decision.verdict is Verdict.ESCALATE:
            return self.texts.review_needed
        if decision.verdict is Verdict.CLARIFY and isinstance(found, EvidenceVerdict):
            options = "; ".join(f"{k}: {v}" for k, v in found.values.items())
            options = options or ", ".join(found.conflicting_ids)  # the sources, by id
            return self.texts.render(
                "sources_disagree", key=found.claim_key or "?", options=options or "?"
            )
        return self.texts.abstain

    def _check_sources(self, request: Any) -> None:
        """Fail at the first model call, before any tool ran, when a named source is not a
        tool the model is offered: a misspelt name would otherwise never be arbitrated."""
        offered = {_tool_name(t) for t in request.tools or ()}
        unknown = sorted(self.sources - offered)
        if unknown:
            raise ValueError(
                f"EvidenceResolveMiddleware.tools names {unknown}, which the model is not "
                f"offered (its tools: {sorted(n for n in offered if n)}): pass the tool "
                f"objects (tools=[your_tool]) or their exact names; a middleware that "
                f"selects tools goes after this one in middleware=[...]"
            )

    def _with_note(self, request: Any) -> Any:
        self._check_sources(request)
        messages = list((request.state or {}).get("messages") or request.messages)
        found = self._resolve(messages, _config())
        if not isinstance(found, EvidenceVerdict) or found.verdict is not Verdict.ANSWER:
            return request
        note = _note(found)
        system = request.system_message
        text = f"{content_text(system.content)}\n\n{note}" if system is not None else note
        return request.override(system_message=SystemMessage(text))

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Tell the model the arbitrated values before it answers."""
        return handler(self._with_note(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_model_call`."""
        return await handler(self._with_note(request))
