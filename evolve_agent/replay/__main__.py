from evolve_agent.replay.run import _main

_main()
