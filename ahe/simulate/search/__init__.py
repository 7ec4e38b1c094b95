"""Search strategies judged in the simulator (docs/search.md): worlds whose proposals depend on the parent."""
