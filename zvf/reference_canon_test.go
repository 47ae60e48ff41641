package zvf_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
)

// The canonical forms and hashes the reference checker compares answers
// in: rows sorted, edges and faces as coordinates, Python's JSON and
// ordering for the fixtures' SHA-256 sums.

type answer struct {
	rows  [][3]float32
	ids   []int64
	attrs map[string][]any
	edges []int64
	faces []int64
	fw    int
}

func bbox(t *testing.T, l *zvf.Level, min, max []float64, attrs []string, conn bool) *answer {
	t.Helper()
	a := &answer{attrs: map[string][]any{}}
	res, err := l.BBox(context.Background(), zvf.BBoxQuery{Min: min, Max: max, Attributes: attrs, Connectivity: conn}, func(b *zvf.Batch) error {
		if b.First != int64(len(a.rows)) {
			t.Fatalf("batch First %d, have %d rows", b.First, len(a.rows))
		}
		a.rows = append(a.rows, f32rows(b.Vertices.Data)...)
		a.ids = append(a.ids, b.ObjectIDs...)
		for _, c := range b.Attributes {
			a.attrs[c.Name] = append(a.attrs[c.Name], decodeColumn(t, c)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != int64(len(a.rows)) {
		t.Fatalf("Count %d, rows %d", res.Count, len(a.rows))
	}
	a.edges, a.faces, a.fw = res.Edges, res.Faces, res.FaceWidth
	return a
}

func f32rows(b []byte) [][3]float32 {
	out := make([][3]float32, len(b)/12)
	for i := range out {
		for j := 0; j < 3; j++ {
			out[i][j] = math.Float32frombits(binary.LittleEndian.Uint32(b[12*i+4*j:]))
		}
	}
	return out
}

func decodeColumn(t *testing.T, c zvf.Column) []any {
	t.Helper()
	var out []any
	size := map[string]int{"uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}[c.DType]
	n := len(c.Data) / size
	vals := make([]float64, n)
	for i := range vals {
		p := c.Data[i*size:]
		switch c.DType {
		case "uint8":
			vals[i] = float64(p[0])
		case "int8":
			vals[i] = float64(int8(p[0]))
		case "uint16":
			vals[i] = float64(binary.LittleEndian.Uint16(p))
		case "int16":
			vals[i] = float64(int16(binary.LittleEndian.Uint16(p)))
		case "int32":
			vals[i] = float64(int32(binary.LittleEndian.Uint32(p)))
		case "uint32":
			vals[i] = float64(binary.LittleEndian.Uint32(p))
		case "float32":
			vals[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
		case "int64":
			vals[i] = float64(int64(binary.LittleEndian.Uint64(p)))
		case "float64":
			vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(p))
		}
	}
	for r := 0; r < n/c.Channels; r++ {
		row := vals[r*c.Channels : (r+1)*c.Channels]
		if c.Categories != nil {
			code := int64(row[0])
			if c.NullCode != nil && code == *c.NullCode {
				out = append(out, nil)
			} else {
				out = append(out, c.Categories[code])
			}
			continue
		}
		if c.Channels == 1 {
			out = append(out, row[0])
		} else {
			cp := make([]any, len(row))
			for i, v := range row {
				cp[i] = v
			}
			out = append(out, cp)
		}
	}
	return out
}

func shaRows(rows [][3]float32) string {
	var buf bytes.Buffer
	for _, r := range rows {
		for _, v := range r {
			_ = binary.Write(&buf, binary.LittleEndian, v)
		}
	}
	s := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(s[:])
}

func less(a, b [3]float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func sortedSHA(rows [][3]float32) string {
	s := append([][3]float32(nil), rows...)
	sort.Slice(s, func(i, j int) bool { return less(s[i], s[j]) })
	return shaRows(s)
}

// sortedWithAttrs sorts rows (ties by attribute values, as the fixtures
// do) and permutes the attributes with them.
func sortedWithAttrs(a *answer) ([][3]float32, map[string][]any) {
	idx := make([]int, len(a.rows))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool {
		ri, rj := a.rows[idx[i]], a.rows[idx[j]]
		if ri != rj {
			return less(ri, rj)
		}
		return fmt.Sprint(attrTuple(a, idx[i])) < fmt.Sprint(attrTuple(a, idx[j]))
	})
	rows := make([][3]float32, len(idx))
	attrs := map[string][]any{}
	for k, i := range idx {
		rows[k] = a.rows[i]
		for n, v := range a.attrs {
			attrs[n] = append(attrs[n], v[i])
		}
	}
	return rows, attrs
}

func attrTuple(a *answer, i int) []any {
	names := make([]string, 0, len(a.attrs))
	for n := range a.attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]any, len(names))
	for k, n := range names {
		out[k] = a.attrs[n][i]
	}
	return out
}

func rowOf(v []float64) [3]float32 { return [3]float32{float32(v[0]), float32(v[1]), float32(v[2])} }

// canonEdges renders edges as sorted pairs of coordinate rows, sorted.
func canonEdges(rows [][3]float32, edges []int64, directed bool) []string {
	out := make([]string, 0, len(edges)/2)
	for i := 0; i+1 < len(edges); i += 2 {
		a, b := rows[edges[i]], rows[edges[i+1]]
		if !directed && less(b, a) {
			a, b = b, a
		}
		out = append(out, fmt.Sprint(a, b))
	}
	sort.Strings(out)
	return out
}

func canonFaces(rows [][3]float32, faces []int64, w int) []string {
	var out []string
	if w < 1 { // no faces (a non-mesh answer's face width is 0); stepping by 0 would never end
		return nil
	}
	for i := 0; i+w <= len(faces); i += w {
		f := make([][3]float32, w)
		for k := 0; k < w; k++ {
			f[k] = rows[faces[i+k]]
		}
		m := 0
		for k := range f {
			if less(f[k], f[m]) {
				m = k
			}
		}
		rot := append(append([][3]float32{}, f[m:]...), f[:m]...)
		out = append(out, fmt.Sprint(rot))
	}
	sort.Strings(out)
	return out
}

func normalize(v any) any {
	return mapLeaves(v, func(v any) any {
		if f, ok := v.(float64); ok {
			return float32(f)
		}
		return v
	})
}

func normalizeAll(v []any) []any { return normalize(v).([]any) }

// mapLeaves returns v with f applied to every value that is not a list,
// through lists of lists.
func mapLeaves(v any, f func(any) any) any {
	x, ok := v.([]any)
	if !ok {
		return f(v)
	}
	out := make([]any, len(x))
	for i := range x {
		out[i] = mapLeaves(x[i], f)
	}
	return out
}

func checkRows(t *testing.T, what string, got [][3]float32, want coords) {
	t.Helper()
	if want == nil {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i, r := range want {
		if rowOf(r) != got[i] {
			t.Fatalf("%s: row %d = %v, want %v", what, i, got[i], r)
		}
	}
}

func checkAttrs(t *testing.T, got, want map[string][]any) {
	t.Helper()
	for n, vals := range want {
		gv := got[n]
		if len(gv) != len(vals) {
			t.Fatalf("attribute %s: %d values, want %d", n, len(gv), len(vals))
		}
		for i := range vals {
			if fmt.Sprint(normalize(number(vals[i]))) != fmt.Sprint(normalize(gv[i])) {
				t.Fatalf("attribute %s row %d = %v, want %v", n, i, gv[i], vals[i])
			}
		}
	}
}

// number turns the fixtures' json.Number values into float64 (as
// decodeColumn gives them).
func number(v any) any {
	return mapLeaves(v, func(v any) any {
		if n, ok := v.(json.Number); ok {
			f, _ := n.Float64()
			return f
		}
		return v
	})
}

func checkObjectAttr(t *testing.T, o *zvf.Object, name string, want json.Number) {
	t.Helper()
	for _, c := range o.ObjectAttributes {
		if c.Name != name {
			continue
		}
		v := c.At(0)
		var got string
		switch v.Kind {
		case zvf.KindUint:
			got = strconv.FormatUint(v.U, 10)
		case zvf.KindInt:
			got = strconv.FormatInt(v.I, 10)
		default:
			f, _ := want.Float64()
			if float32(v.Float64()) == float32(f) {
				return
			}
			got = fmt.Sprint(v.Float64())
		}
		if got != want.String() {
			t.Fatalf("object %d %s = %s, want %s", o.ID, name, got, want)
		}
		return
	}
	t.Fatalf("object %d has no object attribute %s (has %d)", o.ID, name, len(o.ObjectAttributes))
}

func coordPairs(pairs []coords, directed bool) []string {
	rows := make([][3]float32, 0, 2*len(pairs))
	edges := make([]int64, 0, 2*len(pairs))
	for _, p := range pairs {
		edges = append(edges, int64(len(rows)), int64(len(rows)+1))
		rows = append(rows, rowOf(p[0]), rowOf(p[1]))
	}
	return canonEdges(rows, edges, directed)
}

func coordFaces(faces []coords) []string {
	var rows [][3]float32
	var idx []int64
	w := 3
	for _, f := range faces {
		w = len(f)
		for _, c := range f {
			idx = append(idx, int64(len(rows)))
			rows = append(rows, rowOf(c))
		}
	}
	return canonFaces(rows, idx, w)
}

// edgeLists renders edges as the fixtures' JSON lists: [a, b] coordinate
// pairs, each undirected pair sorted.
func edgeLists(rows [][3]float32, edges []int64, directed bool) []any {
	var out []any
	for i := 0; i+1 < len(edges); i += 2 {
		a, b := rows[edges[i]], rows[edges[i+1]]
		if !directed && less(b, a) {
			a, b = b, a
		}
		out = append(out, []any{pyRow(a), pyRow(b)})
	}
	return out
}

// faceLists renders faces rotated so the smallest corner comes first.
func faceLists(rows [][3]float32, faces []int64, w int) []any {
	var out []any
	for i := 0; i+w <= len(faces); i += w {
		m := 0
		for k := 1; k < w; k++ {
			if less(rows[faces[i+k]], rows[faces[i+m]]) {
				m = k
			}
		}
		f := make([]any, w)
		for k := 0; k < w; k++ {
			f[k] = pyRow(rows[faces[i+(m+k)%w]])
		}
		out = append(out, f)
	}
	return out
}

func pyRow(r [3]float32) []any {
	return []any{float64(r[0]), float64(r[1]), float64(r[2])}
}

// attrSHA is the fixtures' sha of one attribute's values, sorted with the
// rows: SHA-256 of their compact JSON (integer types as integers, in every
// channel of a multi-channel value).
func attrSHA(vals []any, dtype string) string {
	integer := strings.HasPrefix(dtype, "int") || strings.HasPrefix(dtype, "uint")
	asInts := func(v any) any {
		if f, ok := v.(float64); ok && integer {
			return int64(f)
		}
		return v
	}
	h := sha256.Sum256([]byte(pyJSON(mapLeaves(vals, asInts))))
	return hex.EncodeToString(h[:])
}

func attrDType(l *zvf.Level, name string) string {
	for _, a := range l.Info().VertexAttributes {
		if a.Name == name {
			return a.DType
		}
	}
	return ""
}

// pySHA is the fixtures' hash of a list: sorted the way Python sorts
// lists, rendered as compact JSON, SHA-256.
func pySHA(list []any) string {
	s := slices.Clone(list)
	sort.SliceStable(s, func(i, j int) bool { return pyCompare(s[i], s[j]) < 0 })
	h := sha256.Sum256([]byte(pyJSON(s)))
	return hex.EncodeToString(h[:])
}

// pyCompare orders numbers and lists as Python does.
func pyCompare(a, b any) int {
	switch x := a.(type) {
	case []any:
		y := b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := pyCompare(x[i], y[i]); c != 0 {
				return c
			}
		}
		return len(x) - len(y)
	}
	fa, fb := num(a), num(b)
	switch {
	case fa < fb:
		return -1
	case fa > fb:
		return 1
	}
	return 0
}

func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	panic(fmt.Sprintf("not a number: %T", v))
}

// pyJSON renders v like Python's json.dumps(separators=(",", ":")):
// integers as integers, floats by their shortest repr.
func pyJSON(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				walk(e)
			}
			b.WriteByte(']')
		case int64:
			b.WriteString(strconv.FormatInt(x, 10))
		case int:
			b.WriteString(strconv.Itoa(x))
		case json.Number:
			b.WriteString(x.String())
		case string:
			q, _ := json.Marshal(x)
			b.Write(q)
		case nil:
			b.WriteString("null")
		case float64:
			switch a := math.Abs(x); {
			case x == math.Trunc(x) && a < 1e16:
				b.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
			case a >= 1e16 || a < 1e-4:
				b.WriteString(strconv.FormatFloat(x, 'e', -1, 64))
			default:
				b.WriteString(strconv.FormatFloat(x, 'f', -1, 64))
			}
		default:
			panic(fmt.Sprintf("pyJSON: %T", v))
		}
	}
	walk(v)
	return b.String()
}

// numbers is number over a list.
func numbers(v []any) []any { return number(v).([]any) }
