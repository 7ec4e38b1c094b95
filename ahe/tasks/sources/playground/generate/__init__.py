"""`ahe tasks generate`: the model stages of SWE-Playground (propose, plan, scaffold, tests,
reference), each a session of the `generator` workspace, resumable stage by stage."""
