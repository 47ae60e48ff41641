package api_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// readTCK reads a TCK file as MRtrix and nibabel do: after the header
// (up to its file: offset), float32 triplets; a point whose x is NaN ends
// a streamline, one whose x is infinite ends the file. It returns the
// header's count and the streamlines' point counts.
func readTCK(t *testing.T, b []byte) (count int, lines []int) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^count: (\d+)$`).FindSubmatch(b)
	f := regexp.MustCompile(`(?m)^file: \. (\d+)$`).FindSubmatch(b)
	if m == nil || f == nil {
		t.Fatalf("not a TCK header: %.200q", b)
	}
	count, _ = strconv.Atoi(string(m[1]))
	off, _ := strconv.Atoi(string(f[1]))
	n := 0
	for p := off; p+12 <= len(b); p += 12 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(b[p:]))
		switch {
		case math.IsInf(float64(x), 0):
			return count, lines
		case math.IsNaN(float64(x)):
			lines = append(lines, n)
			n = 0
		default:
			n++
		}
	}
	t.Fatal("TCK file without its end point")
	return
}

// TestTCKNonFiniteCoordinates: TCK marks a streamline's end with a NaN
// point and the file's with an infinite one, so a coordinate that is not
// a finite float32 cannot be written as a point: readers took a NaN x for
// the end of the streamline (two streamlines where the header counts one)
// and an infinite one for the end of the file (every later streamline
// lost). Such an object is a 422 (as GLB's non-finite positions are),
// never a file that reads back as other streamlines; the others read back
// whole.
func TestTCKNonFiniteCoordinates(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "polylines.zarrvectors"))
	files, err := filepath.Glob(filepath.Join(dir, "0", "vertices", "*", "c", "0"))
	if err != nil || len(files) < 2 {
		t.Fatalf("%d vertex files, %v", len(files), err)
	}
	slices.Sort(files)
	for i, v := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		b, err := os.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint32(b[12*(len(b)/24):], math.Float32bits(v)) // a middle row's x
		if err := os.WriteFile(files[i], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := apitest.Open(t, dir, "lines", cache.New(32<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{st}}).Handler()
	l0, err := st.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for row := range l0.Info().ObjectCount {
		id, err := l0.ObjectIDAt(t.Context(), row)
		if err != nil {
			t.Fatal(err)
		}
		obj := fmt.Sprintf("/api/v1/stores/lines/objects/%d", id)
		a := getJSON(t, h, obj)
		finite := true
		for _, v := range a.Vertices {
			for _, c := range v {
				finite = finite && c.String() != "" // JSON writes NaN and infinities as null
			}
		}
		code, _, body := serve(t, h, obj+"?f=tck")
		if !finite {
			if p := problemOf(t, 422, body); !strings.Contains(p.Detail, "finite") {
				t.Errorf("object %d (a non-finite coordinate) as TCK: %d %q", id, code, p.Detail)
			}
			refused++
			continue
		}
		if code != 200 {
			t.Fatalf("object %d as TCK: %d %s", id, code, body)
		}
		count, lines := readTCK(t, body)
		total := 0
		for _, n := range lines {
			total += n
		}
		if count != len(lines) || int64(total) != a.Count || bytes.Count(body, []byte("END\n")) != 1 {
			t.Errorf("object %d: header counts %d streamlines, readers find %d of %d points; the answer has %d", id, count, len(lines), total, a.Count)
		}
	}
	if refused == 0 {
		t.Fatal("no object holds the forged non-finite rows")
	}
}
