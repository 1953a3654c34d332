"""Guards for LangGraph's prebuilt agents: ``create_react_agent``, supervisors, subgraphs.

* :func:`guarded_react_agent` / :func:`react_agent_hooks` - loop_check and retry_router
  through ``create_react_agent``'s own extension points (a guarded ``ToolNode``,
  ``pre_model_hook``, ``post_model_hook``, ``state_schema``, ``version="v2"``);
* :class:`HandoffPolicy` / :func:`check_handoffs` - a supervisor's handoff loop, bounded
  (handoff tools always run: a handoff is never answered from an earlier result);
* :func:`add_subgraph` / :func:`subgraph_node` / :func:`guard_updates` - a guarded agent
  inside a parent graph, its decisions and usage reaching the parent once;
* :func:`guarded_supervisor` / :func:`guarded_swarm` / :func:`guarded_workers` -
  langgraph-supervisor's ``create_supervisor`` and langgraph-swarm's ``create_swarm`` over
  guarded agents, every decision and count reaching the parent state once.

Example:
    >>> from agent_guards.prebuilt import HandoffPolicy, guarded_react_agent
    >>> HandoffPolicy().stop_after
    1
"""

from agent_guards.prebuilt.handoff import HandoffPolicy, check_handoffs, handoff_names
from agent_guards.prebuilt.multi_agent import guarded_supervisor, guarded_swarm, guarded_workers
from agent_guards.prebuilt.react import (
    GuardedReactState,
    ReactAgentHooks,
    guarded_react_agent,
    react_agent_hooks,
)
from agent_guards.prebuilt.subgraph import add_subgraph, guard_updates, subgraph_node

__all__ = [
    "GuardedReactState",
    "HandoffPolicy",
    "ReactAgentHooks",
    "add_subgraph",
    "check_handoffs",
    "guard_updates",
    "guarded_react_agent",
    "guarded_supervisor",
    "guarded_swarm",
    "guarded_workers",
    "handoff_names",
    "react_agent_hooks",
    "subgraph_node",
]
