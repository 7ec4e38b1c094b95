#!/usr/bin/env bash
# Third-party command-line agents (aider from PyPI, opencode from npm) for the `command` backend's tests (docs/backends.md), installed
# where the local sandbox sees them: bubblewrap binds the host's /usr read-only, so the agent's
# virtualenv lives under /usr/local and is made from the system's /usr/bin/python3 (a pyenv or
# /tmp interpreter is not visible inside the jail). Needs root; its pins never touch AHE's venv.
set -euo pipefail
AIDER_VERSION="${AIDER_VERSION:-0.86.2}"
OPENCODE_VERSION="${OPENCODE_VERSION:-1.18.33}"
venv=/usr/local/lib/ahe-agents/aider
if [ "$(id -u)" != "0" ]; then
  echo "install-cli-agents: not root, aider not installed (its test skips)"; exit 0
fi
if [ ! -x "$venv/bin/aider" ] || ! "$venv/bin/aider" --version 2>/dev/null | grep -q "$AIDER_VERSION"; then
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "aider-chat==$AIDER_VERSION"
fi
ln -sf "$venv/bin/aider" /usr/local/bin/aider
echo "install-cli-agents: $(/usr/local/bin/aider --version) at /usr/local/bin/aider"
# opencode (npm): a self-contained binary; its package's postinstall is not needed
oc=/usr/local/lib/ahe-agents/opencode
if [ "$("$oc/node_modules/.bin/opencode" --version 2>/dev/null)" != "$OPENCODE_VERSION" ]; then
  npm install -s --prefix "$oc" "opencode-ai@$OPENCODE_VERSION"
fi
ln -sf "$oc/node_modules/.bin/opencode" /usr/local/bin/opencode
echo "install-cli-agents: opencode $(/usr/local/bin/opencode --version) at /usr/local/bin/opencode"
