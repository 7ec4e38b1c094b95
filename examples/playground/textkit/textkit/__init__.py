"""textkit: small text algorithms behind one command-line tool (a SWE-Playground seed project)."""
