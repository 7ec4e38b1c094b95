"""gridpath: shortest paths and regions on text grids (a SWE-Playground seed project)."""
