#!/bin/bash
# The reference: the target commit's non-test files over the base code.
set -e
while IFS= read -r path; do
  [ -n "$path" ] || continue
  rm -rf -- "/app/$path"
  # a folder the deletions emptied goes too (a renamed <name>-<version>.dist-info)
  case "$path" in */*) (cd /app && rmdir -p --ignore-fail-on-non-empty -- "${path%/*}" 2>/dev/null) || true ;; esac
done < /solution/deleted.txt
cp -a /solution/files/. /app/
