"""The leakage lint: task names, expected outputs and verifier lines are caught; ordinary text is not."""

from __future__ import annotations

import pytest

from evolve_agent.leakage import LeakIndex, added_lines
from tests.conftest import REPO, SEED, write_files

TASKS = REPO / "examples" / "tasks"

ORDINARY = """
## Lessons learned
- Before you finish, compare the output file with the format the task states, byte for byte:
  trailing newline, tabs versus spaces, sort order and how ties are broken.
- When a log says "message repeated N times", count it as N events.
- Run the project's own tests (python3 -m unittest discover -s tests -t .) before finishing.
- Keep the caller's input unmodified; return tuples when the interface documents tuples.
- To purge a secret from git history: rewrite with git filter-branch, expire the reflog, gc --prune=now.
- A server started with background=true keeps running; probe it with curl http://127.0.0.1:8080/health.
- Money: use decimal.Decimal, never float; round only at the end, to 2 places.
- Check checksums with sha256sum -c; the machine is x86_64 with python3.11.
- Cron: five fields; compute the next runs from a fixed start such as 2030-01-01 00:00 UTC.
"""


@pytest.fixture(scope="module")
def index() -> LeakIndex:
    seed_text = "\n".join(p.read_text() for p in SEED.rglob("*") if p.is_file() and "__pycache__" not in str(p))
    return LeakIndex.from_tasks(TASKS, public_text=seed_text)


def lint(index: LeakIndex, text: str, where: str = "LongTermMEMORY.md") -> list[str]:
    return [f.message() for f in index.lint({where: text.splitlines()})]


def test_catches_a_task_name(index):
    out = lint(index, "- In fix-interval-merge, touching intervals must merge.")
    assert out == ["leakage in LongTermMEMORY.md: the name of task fix-interval-merge was copied in: 'fix-interval-merge'"]
    assert lint(index, "- Similar to SQL-Country-Revenue tasks: ...")  # case-insensitive, whole token
    assert not lint(index, "- prefix-fix-interval-merge-suffix is another word")  # not a whole token


def test_catches_expected_outputs(index):
    block = "Expected:\n171\triver\n153\tlight\n153\tstone\n"  # word-frequency-top/tests/expected_top10.txt
    assert any("lines of the expected output/verifier of task word-frequency-top" in m for m in lint(index, block))
    value = lint(index, "- The attacker in such logs is usually 198.51.100.23.")  # log-find-attacker/tests/expected.json
    assert value and "a value from the verifier/solution of task log-find-attacker (tests/expected.json)" in value[0]
    assert lint(index, "north 47 517 671132.36")  # csv-region-totals: a line and its amount


@pytest.mark.parametrize("tag", ["abcdefab", "ab1cdefa", "abcd1234", "a1b2c3d4"])
def test_catches_a_two_line_expected_output_whatever_its_tokens(tmp_path, tag):
    """The evolve escape test's task: with fewer than 3 digits in its one odd token (4% of random
    tags) this output matched no rule, and copying it into memory passed the gate."""
    expected = f"north\t{tag}\t517\nsouth\t39\t355\n"
    write_files(tmp_path, {"alpha-report/task.toml": '[task]\nname = "alpha-report"\n',
                           "alpha-report/instruction.md": "Write the totals to /app/out.txt.\n",
                           "alpha-report/tests/expected.txt": expected})
    out = lint(LeakIndex.from_tasks(tmp_path), f"- The answer file must be exactly:\n{expected}")
    assert any("lines of the expected output/verifier of task alpha-report (tests/expected.txt)" in m for m in out), out
    one_line = lint(LeakIndex.from_tasks(tmp_path), f"- north\t{tag}\n- south is the other region")
    assert not any("lines of the expected output" in m for m in one_line)  # a block needs both lines


def test_catches_a_verifier_line(index):
    out = lint(index, "    self.assertEqual(merge([(1, 10), (2, 3), (4, 5)]), [(1, 10)])", where="skills/x/SKILL.md")
    assert out and out[0].startswith("leakage in skills/x/SKILL.md: a line of the verifier/solution of task fix-interval-merge")


def test_does_not_flag_ordinary_text(index):
    assert lint(index, ORDINARY) == []
    docs = "\n".join((REPO / "docs" / name).read_text() for name in ("hooks.md", "tools.md", "concepts.md", "workspace-format.md"))
    assert lint(index, docs, where="systemprompt.md") == []
    assert lint(index, (SEED / "tools" / "shell.py").read_text(), where="tools/shell2.py") == []


def test_public_and_shared_text_is_not_secret(tmp_path):
    write_files(tmp_path, {
        "t-one/task.toml": '[task]\nname = "org/t-one-task"\n',
        "t-one/instruction.md": "Print exactly: the quick brown fox jumps over 13 lazy dogs\n",
        "t-one/tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\ngrep -q 'the quick brown fox jumps over 13 lazy dogs' /app/out && echo 1 > /logs/verifier/reward.txt\n"
                               "python3 /tests/check_common_things.py --strict --verbose\n",
        "t-two/task.toml": '[task]\nname = "hello"\n',
        "t-two/tests/test.sh": "#!/bin/bash\npython3 /tests/check_common_things.py --strict --verbose\nsecret answer is 4242-777\n",
    })
    idx = LeakIndex.from_tasks(tmp_path)
    assert idx.n_tasks == 2
    assert sorted(idx.names) == ["t-one-task"]  # the folder name "t-one" is too short, "hello" too plain
    assert idx.lint({"m.md": ["print the quick brown fox jumps over 13 lazy dogs"]}) == []  # from the instruction
    assert idx.lint({"m.md": ["python3 /tests/check_common_things.py --strict --verbose"]}) == []  # in both tasks
    assert idx.lint({"m.md": ["say hello"]}) == []
    hits = idx.lint({"m.md": ["the answer: 4242-777", "see t-one-task"]})
    assert sorted(f.rule for f in hits) == ["secret_value", "task_name"]


def test_added_lines_of_a_git_diff():
    diff = ("diff --git a/LongTermMEMORY.md b/LongTermMEMORY.md\n--- a/LongTermMEMORY.md\n+++ b/LongTermMEMORY.md\n"
            "@@ -0,0 +1,2 @@\n+- lesson one\n+- lesson two\n"
            "diff --git a/old.md b/old.md\n--- a/old.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n")
    assert added_lines(diff) == {"LongTermMEMORY.md": ["- lesson one", "- lesson two"]}
