"""Reference graphs for agent-guards (shipped as ``agent_guards.graphs``)."""
