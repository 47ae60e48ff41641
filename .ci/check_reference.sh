#!/usr/bin/env bash
# check_reference.sh — write the demo stores with zvfserve and check them with
# the ZVF reference implementation (zarr-vectors-py 0.7): validate(level=5) and
# its readers against the scene the stores were written from.
#
# Needs a Python that can import zarr_vectors, e.g. the venv made by
# ../shared/tools/refwriter/setup.sh (see its README).
#
#   .ci/check_reference.sh                      # seed 1, scale 1, codec none
#   SEED=7 SCALE=3 CODEC=zstd .ci/check_reference.sh
#   REFWRITER_PYTHON=/path/to/python .ci/check_reference.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${REFWRITER_PYTHON:-../shared/tools/refwriter/.venv/bin/python}"
if ! "$PY" -c 'import zarr_vectors' 2>/dev/null; then
  echo "check_reference: $PY cannot import zarr_vectors; set REFWRITER_PYTHON (see ../shared/tools/refwriter/README.md)" >&2
  exit 2
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
go run ./cmd/zvfserve demo --seed "${SEED:-1}" --scale "${SCALE:-1}" --codec "${CODEC:-none}" \
  --truth "$out/demo/truth.json" "$out/demo"
"$PY" .ci/check_reference.py "$out/demo"
