#!/usr/bin/env bash
# Print a PATH on which Docker and Chromium do not exist, as on a fresh machine that has only
# bubblewrap and git: one folder of symlinks to every program on the current PATH except the
# docker engine, its client and helpers, and the browsers. Usage: PATH=$(bash .ci/fresh-path.sh DIR)
set -euo pipefail
dir=${1:?usage: fresh-path.sh DIR}
rm -rf "$dir"
mkdir -p "$dir"
IFS=: read -r -a parts <<<"$PATH"
for d in "${parts[@]}"; do
  [ -d "$d" ] || continue
  for f in "$d"/*; do
    name=${f##*/}
    case "$name" in
      docker*|containerd*|runc|ctr|chromium*|chrome*|google-chrome*) continue ;;
    esac
    [ -x "$f" ] && [ ! -e "$dir/$name" ] && ln -s "$f" "$dir/$name"
  done
done
echo "$dir"
