"""Reference graphs for agent-guards: ``agent_guards.graphs.plan_execute`` and its scenarios."""
