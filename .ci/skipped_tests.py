"""Print the node ids of the tests a pytest run skipped, read from its JUnit XML (one per line).

CI first runs the suite as a fresh machine would see it (no Docker, no Chromium), then re-runs
exactly what that run skipped with the engine and the browser present and required."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def node_id(case: ET.Element) -> str:
    """tests.test_x.TestY + test_z[param] -> tests/test_x.py::TestY::test_z[param]."""
    parts = case.get("classname", "").split(".")
    path = [p for p in parts if p and p[0].islower()]
    cls = [p for p in parts if p and p[0].isupper()]
    return "/".join(path) + ".py::" + "::".join(cls + [case.get("name", "")])


def main(xml_path: str) -> None:
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        if case.find("skipped") is not None:
            print(node_id(case))


if __name__ == "__main__":
    main(sys.argv[1])
