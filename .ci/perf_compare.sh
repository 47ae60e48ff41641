#!/usr/bin/env bash
# Side-by-side: the reference Python reader versus zvfserve, cold process
# (median of 5) and warm server (median of 7), on the 2,000,000-point store that the reference's own
# gen_perf.py writes. The warm server is timed twice: curl on a new
# connection per request (warm_ms: connect, accept and a first request on
# the connection included), and on one kept-alive connection, as a viewer
# asks (warm_ka_ms: the 7 requests after the first of 8 on one curl).
# Needs ../shared/tools/refwriter set up (see its README):
#
#   .ci/perf_compare.sh [STORE] [REFWRITER_DIR]
#
# STORE defaults to /tmp/zvf-perf/perf_points.zarrvectors (written with
# gen_perf.py if missing). Prints one line per box with the medians and the
# speed-ups, as docs/performance.md reports them.
#
# ZVF_BIN=/path/to/zvfserve times that binary instead of building this tree
# (to compare an older build in the same run); ZVF_PORT picks the warm
# server's port (default 18931) so that two runs can share a machine.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REF=${2:-$ROOT/../shared/tools/refwriter}
STORE=${1:-/tmp/zvf-perf/perf_points.zarrvectors}
PY=$REF/.venv/bin/python
[ -x "$PY" ] || { echo "refwriter venv missing: run $REF/setup.sh (see its README)" >&2; exit 2; }
if [ ! -f "$STORE/zarr.json" ]; then
  mkdir -p "$(dirname "$STORE")"
  "$PY" "$REF/gen_perf.py" "$(dirname "$STORE")" 2000000 >&2
fi
if [ -n "${ZVF_BIN:-}" ]; then
  BIN=$ZVF_BIN
else
  BIN=$(mktemp -d)/zvfserve
  # ZVF_BUILD_TAGS=nogcs,noazblob measures the lean build (README).
  (cd "$ROOT" && go build -tags "${ZVF_BUILD_TAGS:-}" -o "$BIN" ./cmd/zvfserve)
fi

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "reference: perf_reference.py (3 runs each)" >&2
REFOUT=$("$PY" "$REF/perf_reference.py" "$STORE" --runs 3)

PORT=${ZVF_PORT:-18931}
"$BIN" serve --addr 127.0.0.1:$PORT --log-level warn --max-vertices 2000000 "perf=$STORE" >/dev/null 2>&1 &
SRV=$!
trap 'kill $SRV 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.1; done

printf '%-15s %9s %12s %14s %10s %10s %10s\n' box vertices python_s zvf_cold_s warm_ms warm_ka_ms speedups
echo "$REFOUT" | while read -r line; do
  q=$(echo "$line" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["query"])')
  [ "$q" = level2_all ] && continue
  py=$(echo "$line" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["median_s"])')
  n=$(echo "$line" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["vertex_count"])')
  lo=$(echo "$line" | "$PY" -c 'import json,sys; d=json.load(sys.stdin)["bbox"]; print(",".join(str(v) for v in d["min"]))')
  hi=$(echo "$line" | "$PY" -c 'import json,sys; d=json.load(sys.stdin)["bbox"]; print(",".join(str(v) for v in d["max"]))')
  # a fresh process per run, timed from Python (a shell's $(date) costs
  # several milliseconds a call here, and /usr/bin/time rounds to 10 ms)
  cold=$("$PY" -c '
import statistics, subprocess, sys, time
walls = []
for _ in range(5):
    t0 = time.perf_counter()
    subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
    walls.append(time.perf_counter() - t0)
print(statistics.median(walls))' "$BIN" query "$STORE" --level 0 --bbox "$lo,$hi" --f bin)
  url="http://127.0.0.1:$PORT/api/v1/stores/perf/bbox?min=$lo&max=$hi&f=bin&limit=2000000"
  curl -sf -o /dev/null "$url"
  warm=$(for _ in 1 2 3 4 5 6 7; do curl -sf -o /dev/null -w '%{time_total}\n' "$url"; done | median)
  ka=()
  for _ in 1 2 3 4 5 6 7 8; do ka+=(-o /dev/null "$url"); done
  warmka=$(curl -sf -w '%{time_total}\n' "${ka[@]}" | tail -n 7 | median)
  printf '%-15s %9s %12s %14.3f %10.2f %10.2f   cold %.0fx, warm %.0fx, warm kept-alive %.0fx\n' "$q" "$n" "$py" "$cold" \
    "$(echo "$warm*1000" | bc -l)" "$(echo "$warmka*1000" | bc -l)" \
    "$(echo "$py/$cold" | bc -l)" "$(echo "$py/$warm" | bc -l)" "$(echo "$py/$warmka" | bc -l)"
done
