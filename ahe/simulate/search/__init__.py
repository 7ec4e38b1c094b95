"""Search strategies judged in the simulator (docs/search-simulator.md): worlds whose proposals depend on the parent."""
