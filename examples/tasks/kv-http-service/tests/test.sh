#!/bin/bash
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
# The agent's processes are ended before this runs: the grader starts the service.
cd /
setsid nohup python3 /app/kvserver.py > /tmp/kv-grader.log 2>&1 < /dev/null &
echo $! > /app/kv.pid
cd /tmp
if timeout 100 python3 /tests/test_service.py; then
  echo 1 > /logs/verifier/reward.txt
fi
kill "$(cat /app/kv.pid)" 2>/dev/null
exit 0
