"""Real recorded agent trajectories (tau-bench) replayed through the tool wrapper."""
