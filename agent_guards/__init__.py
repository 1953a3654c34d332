"""agent-guards: runtime guards for LangGraph agents."""
