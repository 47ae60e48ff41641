#!/usr/bin/env bash
# The floor under perf_compare.sh's warm column: curl's time for as many bytes
# as each box's binary answer from a Go server that only writes them (held in
# memory, with their length), over a new connection and over a kept-alive one,
# medians of 7 as perf_compare takes them. The reference's time over this
# floor is the most any server can show as "warm" on this machine.
#
#   .ci/perf_floor.sh [PORT]
set -euo pipefail
PORT=${1:-18977}
dir=$(mktemp -d)
trap 'kill $SRV 2>/dev/null || true; rm -rf "$dir"' EXIT
cat > "$dir/main.go" <<'GO'
package main

import (
	"net/http"
	"os"
	"strconv"
)

// Serves, at /?n=N, N bytes held in memory, with their length.
func main() {
	blob := make([]byte, 16<<20)
	_ = http.ListenAndServe(os.Args[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 0 || n > len(blob) {
			http.Error(w, "n: 0 to 16 MiB", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = w.Write(blob[:n])
	}))
}
GO
(cd "$dir" && GO111MODULE=off go build -o floor main.go)
"$dir/floor" "127.0.0.1:$PORT" &
SRV=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/?n=1" && break; sleep 0.1; done
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-15s %9s %12s %14s\n' box bytes new_conn_ms kept_alive_ms
# perf_compare's boxes: vertices × 12 bytes of float32, plus about 600 of header and trailer.
for spec in tiny:1025 small:10160 medium:50054 medium_cluster:49323 large:541189; do
  name=${spec%%:*}; n=$(( ${spec##*:} * 12 + 600 ))
  url="http://127.0.0.1:$PORT/?n=$n"
  curl -s -o /dev/null "$url"
  new=$(for _ in 1 2 3 4 5 6 7; do curl -s -o /dev/null -w '%{time_total}\n' "$url"; done | median)
  ka=(); for _ in 1 2 3 4 5 6 7 8; do ka+=(-o /dev/null "$url"); done
  kam=$(curl -s -w '%{time_total}\n' "${ka[@]}" | tail -n 7 | median)
  printf '%-15s %9d %12.3f %14.3f\n' "$name" "$n" "$(echo "$new*1000" | bc -l)" "$(echo "$kam*1000" | bc -l)"
done
