"""The paper's experiments as commands: ablation (and the explore agent's orchestration)."""
