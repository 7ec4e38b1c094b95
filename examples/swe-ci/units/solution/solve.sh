#!/bin/bash
# The reference: the target commit's non-test files over the base code.
set -e
while IFS= read -r path; do
  [ -n "$path" ] && rm -rf -- "/app/$path"
done < /solution/deleted.txt
cp -a /solution/files/. /app/
