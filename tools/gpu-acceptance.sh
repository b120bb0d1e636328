#!/usr/bin/env bash
# The real-GPU acceptance run (issue 38): everything gpucheck says about this machine, in one folder.
#
#   bash tools/gpu-acceptance.sh [--no-install | --wheels DIR] [--python PATH] [--archive FILE.tgz] FOLDER
#
# A thin wrapper: the work is tools/gpu_acceptance.py (standard library only), run with $PYTHON (default
# python3), which is also the interpreter --no-install uses. docs/measured.md ("The real-GPU command") says
# what it runs, the folder's layout, and what came back on a real GPU.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
    echo "gpu-acceptance: no Python interpreter '$py' (set PYTHON=/path/to/python3)" >&2
    exit 2
fi
exec "$py" "$here/gpu_acceptance.py" "$@"
