package writer

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"
)

// fuzzPositions turns bytes into 3-D positions on a coarse lattice (so
// points land on chunk and bin borders, including negative coordinates).
func fuzzPositions(data []byte) []float32 {
	n := len(data) / 3
	pos := make([]float32, 3*n)
	for i := range pos {
		pos[i] = float32(int8(data[i])) * 1.25
	}
	return pos
}

type row3 [3]float32

func rowsOf(pos []float32) []row3 {
	out := make([]row3, len(pos)/3)
	for i := range out {
		out[i] = row3{pos[3*i], pos[3*i+1], pos[3*i+2]}
	}
	return out
}

func cmpRow(a, b row3) int {
	for i := range 3 {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// objectRows reconstructs each object's rows at a level from its manifest.
func objectRows(t *testing.T, files map[string][]byte, lp string) [][]row3 {
	t.Helper()
	cache := map[coords][2]any{}
	var out [][]row3
	for _, refs := range readManifests(t, files, lp, 3) {
		var rows []row3
		for _, r := range refs {
			e, ok := cache[r.c]
			if !ok {
				k := r.c.key(3)
				e = [2]any{rowsOf(f32s(readBlob(t, files, lp+"/vertices/"+k))),
					decodeFragments(t, readBlob(t, files, lp+"/vertex_fragments/"+k))}
				cache[r.c] = e
			}
			all, frags := e[0].([]row3), e[1].([]int64)
			if int(r.frag) >= len(frags) {
				t.Fatalf("manifest names fragment %d of %v, which has %d", r.frag, r.c, len(frags))
			}
			var start int64
			for _, n := range frags[:r.frag] {
				start += n
			}
			rows = append(rows, all[start:start+frags[r.frag]]...)
		}
		out = append(out, rows)
	}
	return out
}

// FuzzWritePoints: any input is either rejected with *InputError or
// written so that level 0 holds exactly the input rows, every chunk's rows
// lie in that chunk, and each object's manifest yields its rows.
func FuzzWritePoints(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 200, 100, 7}, false, uint8(2))
	f.Add([]byte{10, 20, 30, 10, 20, 31, 255, 255, 255, 128, 0, 127}, true, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, objects bool, binDiv uint8) {
		if len(data) > 3000 {
			return
		}
		pos := fuzzPositions(data)
		pc := &PointCloud{Positions: pos}
		if objects {
			pc.ObjectIDs = make([]int64, len(pos)/3)
			for i := range pc.ObjectIDs {
				pc.ObjectIDs[i] = int64(data[i] % 5)
			}
		}
		div := float64(binDiv%4 + 1)
		o := Options{ChunkShape: []float64{20, 20, 20}, BinShape: []float64{20 / div, 20 / div, 20 / div},
			Pyramid: []PyramidLevel{{Coarsen: 2}}}
		ms := newMemStore()
		_, err := WritePoints(context.Background(), ms, "", pc, o)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		files := ms.files("")
		var got []row3
		for _, k := range chunkKeys(files, "0/vertices") {
			rows := rowsOf(f32s(readBlob(t, files, "0/vertices/"+k)))
			c := parseKey(k)
			for _, r := range rows {
				for a := range 3 {
					if cc := int64(float64(r[a]) / 20); float64(r[a]) >= 0 && cc != c[a] {
						t.Fatalf("row %v stored in chunk %s", r, k)
					}
				}
			}
			got = append(got, rows...)
		}
		want := rowsOf(pos)
		slices.SortFunc(got, cmpRow)
		slices.SortFunc(want, cmpRow)
		if !slices.Equal(got, want) {
			t.Fatalf("level 0 rows differ: %d vs %d", len(got), len(want))
		}
		if objects {
			per := objectRows(t, files, "0")
			for oid, rows := range per {
				var w []row3
				for i, id := range pc.ObjectIDs {
					if id == int64(oid) {
						w = append(w, row3{pos[3*i], pos[3*i+1], pos[3*i+2]})
					}
				}
				slices.SortFunc(rows, cmpRow)
				slices.SortFunc(w, cmpRow)
				if !slices.Equal(rows, w) {
					t.Fatalf("object %d rows differ", oid)
				}
			}
		}
	})
}

// FuzzWritePolylines: every polyline read back through its manifest equals
// the input polyline, vertex for vertex, in order.
func FuzzWritePolylines(f *testing.F) {
	f.Add([]byte{0, 0, 0, 5, 5, 5, 30, 30, 30, 60, 2, 2}, []byte{2, 2})
	f.Add([]byte{250, 1, 1, 3, 3, 3, 9, 9, 9}, []byte{0, 3})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		if len(data) > 3000 {
			return
		}
		pos := fuzzPositions(data)
		n := len(pos) / 3
		offs := []int{0}
		for _, c := range cuts {
			next := offs[len(offs)-1] + int(c%8)
			if next > n {
				break
			}
			offs = append(offs, next)
		}
		if offs[len(offs)-1] != n {
			offs = append(offs, n)
		}
		pl := &Polylines{Positions: pos, Offsets: offs}
		ms := newMemStore()
		if _, err := WritePolylines(context.Background(), ms, "", pl, Options{ChunkShape: []float64{20, 20, 20},
			BinShape: []float64{10, 10, 10}}); err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		per := objectRows(t, ms.files(""), "0")
		if len(per) != len(offs)-1 && !(len(offs) == 2 && n == 0) {
			t.Fatalf("%d objects, want %d", len(per), len(offs)-1)
		}
		for p, rows := range per {
			if want := rowsOf(pos[3*offs[p] : 3*offs[p+1]]); !slices.Equal(rows, want) {
				t.Fatalf("polyline %d: got %v want %v", p, rows, want)
			}
		}
	})
}
