#!/usr/bin/env bash
# The lowest declared versions (issue 34): a brand-new venv, the README's install line with every
# direct dependency pinned at its lower bound (.ci/lowest-constraints.py), `ahe demo`, `ahe run`
# against a closed port (one sentence, non-zero exit, no traceback) and the tests of what an old
# release could break: the model client and its transport (a dropped and a refused connection
# among them), the CLI's config, the plan, an infra round and the loop end to end.
# (tests/adversarial/test_listener.py: collecting a test package is what pytest-asyncio 0.23.0–0.23.4 broke.)
#   bash .ci/lowest.sh WORKDIR
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=${1:?usage: .ci/lowest.sh WORKDIR}
BASE_PY=$(command -v python3 || command -v python)
mkdir -p "$work"
"$BASE_PY" -m venv "$work/low-venv"
low="$work/low-venv/bin"
"$BASE_PY" .ci/lowest-constraints.py dev >"$work/lowest.txt"
"$low/pip" install -q -e ".[dev]" -c "$work/lowest.txt"
echo "lowest versions installed:"
"$low/pip" list --format=freeze | grep -i -E "^($(sed 's/==.*//' "$work/lowest.txt" | paste -sd'|'))==" | paste -sd' '
# no warning of an old release at import (pydantic 2.6 warned on `model_` fields)
"$low/python" -W error::UserWarning -c "import ahe.cli, ahe.config, ahe.rollout.models, ahe.agents.mini_session, ahe.evolution.loop"
mkdir -p "$work/low-user"
(cd "$work/low-user" && "$low/ahe" demo "$work/low-user/demo" --quiet)
set +e
out=$(cd "$work/low-user" && OPENAI_BASE_URL=http://127.0.0.1:9/v1 OPENAI_API_KEY=x AHE_MODEL=m \
  "$low/ahe" run --workspace "$repo/harness_workspace" --instruction "write hello to a.txt" --out run-closed --isolation none 2>&1)
rc=$?
set -e
if [ "$rc" = 0 ] || grep -q Traceback <<<"$out" || ! grep -q "127.0.0.1:9" <<<"$out"; then
  echo "ahe run against a closed port on the lowest versions: exit $rc, expected one sentence naming 127.0.0.1:9:"
  echo "$out"
  exit 1
fi
echo "ahe run against a closed port: exit $rc, $(grep -c . <<<"$out") line(s): $(tail -1 <<<"$out")"
DOCKER_HOST="unix:///nonexistent/ahe-no-docker.sock" "$low/python" -m pytest -q -n auto -p no:cacheprovider \
  tests/test_llm_client.py tests/test_llm_transport.py tests/test_llm_client_tool_args.py tests/test_runtime_config.py \
  tests/test_plan.py tests/test_infra_round.py tests/test_loop_e2e.py tests/test_architecture.py tests/adversarial/test_listener.py
