"""SWE-CI evolution tasks (DESIGN.md §11.3, docs/swe-ci.md).

* `metrics`    n(c), a(c), EvoScore, regressions, zero-regression (stdlib; shipped into tasks)
* `runner`, `verify`   the test runner and verifier copied into each task's tests/
* `layout`     writes a task folder from a base and a target tree
* `counting`   counts n(c0), n(c*) in the task's own sandbox
* `maker`      `ahe tasks make swe-ci`: a task from a git repository's two commits
* `published`  `ahe tasks import swe-ci`: the published benchmark's layout
* `rounds`, `ci_loop`   the CI loop (the trial kind is ahe.rollout.ci_trial); `architect/` its workspace
* `summary`    the run-level numbers (EvoScore at gamma, solved and zero-regression rates)
"""
