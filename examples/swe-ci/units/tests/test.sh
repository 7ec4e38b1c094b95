#!/bin/bash
# SWE-CI verifier: runs the pristine target tests on a copy of /app and writes reward.json.
mkdir -p /logs/verifier
python3 /tests/verify.py --app /app --logs /logs/verifier
