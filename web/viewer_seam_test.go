package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/writer"
)

// seamServer serves "seam": a site in each 32-unit bin of the cube
// [o, o+1024), four points on each (level 0: 131,072 points, eight tiles
// of chunks of 512) and one (level 1, bins of 32: the mean of the four).
// Coordinates are odd whole numbers (float32 holds them at 10^7), each
// batch's first cell odd, except that the sites of the bins beside a plane
// x, y or z = o+512 (a face between level-0 tiles) lie on it or a unit
// below it. Level 1 is spaced so its tiles ask for precision 0.5 (cells
// of 1): a site a unit below a face decodes half a unit below it.
func seamServer(t *testing.T, o float64) string {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var pos []float32
	for x := range 32 {
		for y := range 32 {
			for z := range 32 {
				var p [3]float32
				for a, bin := range [3]int{x, y, z} {
					v := 32*bin + 1 + 2*r.IntN(16)
					switch bin {
					case 15:
						v = 511
					case 16:
						v = 512
					}
					p[a] = float32(o + float64(v))
				}
				for range 4 {
					pos = append(pos, p[:]...)
				}
			}
		}
	}
	ts := pointsServerWith(t, "seam", &writer.PointCloud{Positions: pos}, writer.Options{
		ChunkShape: []float64{512, 512, 512}, BinShape: []float64{16, 16, 16}, Pyramid: []writer.PyramidLevel{{Coarsen: 2}}})
	return ts.URL
}

// censusTile is a drawn tile's census (__zvf.census): the vertices the
// GPU keeps, per child cell of its mask.
type censusTile struct {
	Layer string
	Level int
	Count int
	Cells []struct {
		Min, Max [3]float64
		Masked   bool
		Kept     int // by the GPU
		Pickable int // by a pick
	}
}

// TestViewerSeamFarFromOriginInBrowser: a tile drawn with refined children
// masked out keeps exactly its vertices in the other cells, as the server
// counts them, near the origin and at 10^7, and a pick considers those.
// The fragment shader compared absolute float32 positions with the cells'
// faces, and a pick the decoded float32 ones: at 10^7 a float32 is a whole
// unit apart, a point half a unit below a face was taken for one on it,
// and points beside the seams were hidden or drawn twice (the GPU kept
// 3,631 of a cell's 4,096 and 256 in each of three masked cells).
func TestViewerSeamFarFromOriginInBrowser(t *testing.T) {
	ch := newChrome(t)
	for _, o := range []float64{0, 9_999_872} {
		t.Run(strconv.FormatFloat(o, 'f', -1, 64), func(t *testing.T) {
			base := seamServer(t, o)
			b := ch.tab(t, 1280, 800)
			// The budget of the level-1 tile (32,768 points) and three of
			// its eight children (16,384 each): it is drawn with their
			// cells masked out.
			b.navigate(base + "/?stores=seam&budget=85000")
			b.settle()
			var tiles []censusTile
			b.value(`__zvf.census()`, &tiles)
			masked, open, wrong := 0, 0, 0
			for _, tl := range tiles {
				for _, c := range tl.Cells {
					if c.Min[0] > c.Max[0] || c.Min[1] > c.Max[1] || c.Min[2] > c.Max[2] {
						continue
					}
					want := 0
					if c.Masked {
						masked++
					} else {
						open++
						want = boxCount(t, base, tl.Level, c.Min, c.Max)
					}
					if c.Kept != want || c.Pickable != want {
						wrong++
						t.Errorf("level %d, cell %v..%v (masked %v): the GPU kept %d vertices, a pick would consider %d; the server counts %d there", tl.Level, c.Min, c.Max, c.Masked, c.Kept, c.Pickable, want)
					}
				}
			}
			t.Logf("%d tiles, %d masked and %d drawn cells, %d wrong", len(tiles), masked, open, wrong)
			if masked != 3 || open != 8 {
				t.Fatalf("tiles %+v: the test wants a tile drawn with some children masked out", tiles)
			}
			b.noProblems()
		})
	}
}

// boxCount is the server's count of the seam store's level vertices in
// [min, max].
func boxCount(t *testing.T, base string, level int, min, max [3]float64) int {
	t.Helper()
	f := func(v [3]float64) string {
		s := make([]string, 3)
		for i, x := range v {
			s[i] = strconv.FormatFloat(x, 'f', -1, 64)
		}
		return strings.Join(s, ",")
	}
	resp, err := http.Get(fmt.Sprintf("%s/api/v1/stores/seam/count?min=%s&max=%s&level=%d", base, f(min), f(max), level))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("count %v..%v: %d %s", min, max, resp.StatusCode, body)
	}
	var c struct{ Count int }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatalf("count %v..%v: %v", min, max, err)
	}
	return c.Count
}
