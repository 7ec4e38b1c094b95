"""ahe.simulate: the decision simulator (docs/decisions.md). Sits above ahe.evolution: it drives the loop."""
