"""The run-level SWE-CI numbers, from the reward means of results.json.

Each CI trial's reward.json carries `evoscore` (at the task's gamma), `evoscore_gamma_1`,
`normalized_change` (a of the last codebase), `zero_regression`, `solved` and `gamma`; the
mean of each over the trials is the run's EvoScore, mean normalized change, zero-regression
rate and solved rate. `ahe eval`, `ahe audit` and `ahe report` show them through here.
"""

from __future__ import annotations

from collections.abc import Mapping

# (reward key, label) in the order they are shown
COLUMNS = (
    ("evoscore_gamma_1", "EvoScore (γ=1)"),
    ("evoscore", "EvoScore (task γ)"),
    ("normalized_change", "mean normalized change"),
    ("zero_regression", "zero-regression rate"),
    ("solved", "solved rate"),
)


def swe_ci_numbers(reward_means: Mapping[str, float] | None) -> dict[str, float] | None:
    """{label: value} when the run has SWE-CI rewards, else None. The γ label names the mean γ."""
    means = dict(reward_means or {})
    if "evoscore" not in means or "evoscore_gamma_1" not in means:
        return None
    gamma = means.get("gamma")
    out = {}
    for key, label in COLUMNS:
        if key == "evoscore" and gamma:
            label = f"EvoScore (γ={gamma:g})"
        if key in means:
            out[label] = means[key]
    return out


def swe_ci_line(reward_means: Mapping[str, float] | None) -> str | None:
    """One line for a terminal: 'SWE-CI  EvoScore (γ=1) 0.770  …', or None without SWE-CI rewards."""
    numbers = swe_ci_numbers(reward_means)
    if numbers is None:
        return None
    return "SWE-CI  " + "  ".join(f"{label} {value:.3f}" for label, value in numbers.items())
