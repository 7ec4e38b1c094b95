#!/bin/bash
# SWE-CI verifier: runs the pristine target tests on a copy of /app and writes reward.json.
# The task's test environment (its interpreter and packages) is at /opt/ahe-env when it has one.
mkdir -p /logs/verifier
PY=python3
[ -x /opt/ahe-env/bin/python ] && PY=/opt/ahe-env/bin/python
"$PY" /tests/verify.py --app /app --logs /logs/verifier "$@"
