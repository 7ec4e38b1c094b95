"""`search: tree` (issue 36, docs/search.md): an archive of evaluated harnesses, each a commit on
its own branch `node-NNN` of the run's repository, expanded by `ahe.evolution.tree_choice`."""
