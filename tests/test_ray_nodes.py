"""Placement on the Ray cluster without Ray: runners per node and which runner takes a trial."""

from ahe.rollout.ray_nodes import TRIALS_PER_RUNNER, Need, NodeSlot, pick_node


def test_a_node_gets_one_runner_per_trials_per_runner_cpus_and_trials_go_to_the_least_busy():
    assert NodeSlot("a", "a", cpus=2, memory_bytes=0, docker=False).runner_count() == 1
    big = NodeSlot("b", "b", cpus=4 * TRIALS_PER_RUNNER, memory_bytes=0, docker=False)
    assert big.runner_count() == 4
    assert NodeSlot("c", "c", cpus=1000, memory_bytes=0, docker=False).runner_count() == 8  # capped
    big.runners = [object() for _ in range(big.runner_count())]
    taken = [big.least_loaded() for _ in range(8)]
    assert [taken.count(r) for r in big.runners] == [2, 2, 2, 2]  # spread evenly
    big.release(big.runners[3])
    big.release(big.runners[3])
    assert big.least_loaded() is big.runners[3]  # the one that freed up takes the next trial


def test_pick_node_skips_nodes_whose_runners_are_not_up_yet():
    starting = NodeSlot("s", "s", cpus=64, memory_bytes=0, docker=False)
    ready = NodeSlot("r", "r", cpus=2, memory_bytes=0, docker=False, runners=[object()])
    assert pick_node({"s": starting, "r": ready}, Need()) is ready
    ready.take(Need(cpus=2))
    assert pick_node({"s": starting, "r": ready}, Need()) is None
