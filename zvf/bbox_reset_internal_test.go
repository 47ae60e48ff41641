package zvf

import (
	"reflect"
	"testing"
)

// TestChunkMatchReset: reset leaves no field of the previous chunk's
// match behind but the buffers and the pass's settings, and names every
// field of chunkMatch (a field added later must be sorted here too).
func TestChunkMatchReset(t *testing.T) {
	kept := map[string]bool{"pbuf": true, "copy": true, "vown": true, "bt": true, "cnt": true, "bytesOnly": true, "dst": true, "cold": true}
	emptied := map[string]bool{"owner": true} // its array kept, its length 0
	set := map[string]bool{"key": true, "cv": true}
	var m chunkMatch
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		f := reflect.NewAt(v.Field(i).Type(), v.Field(i).Addr().UnsafePointer()).Elem()
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 3, 3))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Interface: // dst
			f.Set(reflect.ValueOf(noSpace{}))
		default:
			t.Fatalf("field %s: a kind (%s) this test does not fill", name, f.Kind())
		}
	}
	before := m
	key, cv := Key{1, 2, 3}, &chunkVerts{rows: 7}
	m.reset(key, cv)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		now := reflect.NewAt(v.Field(i).Type(), v.Field(i).Addr().UnsafePointer()).Elem()
		was := reflect.ValueOf(before).Field(i)
		switch {
		case kept[name]:
			if now.Kind() == reflect.Slice && now.Pointer() != was.Pointer() || now.Kind() != reflect.Slice && !now.Equal(was) {
				t.Errorf("%s: not kept", name)
			}
		case emptied[name]:
			if now.Len() != 0 || now.Cap() != was.Cap() || now.Pointer() != was.Pointer() {
				t.Errorf("%s: len %d cap %d, want its array emptied", name, now.Len(), now.Cap())
			}
		case set[name]:
		case !now.IsZero():
			t.Errorf("%s: %v left from the previous chunk (or a new field reset does not know)", name, now)
		}
	}
	if !m.key.equal(key) || m.cv != cv {
		t.Errorf("key %v cv %p, want %v %p", m.key, m.cv, key, cv)
	}
}

// TestRankedChunksZeroBetweenQueries: ranked stores only the fields it
// knows of a chunk, so every ranked chunk a query used must be zero
// again when its scratch goes back to the pool; a field another step
// set (dense ranks, fragment ranks, bounds) must not reach the next
// query's chunk in that place.
func TestRankedChunksZeroBetweenQueries(t *testing.T) {
	var s Store
	sc := &bboxScratch{}
	cv := &chunkVerts{rows: 9}
	for q := range 2 {
		for i := range rankedBlock + 3 { // past a block
			m := chunkMatch{key: Key{int64(i)}, cv: cv, rows: []int32{1, 4}}
			sc.fr = []int32{0, 1, 2}
			rc := sc.ranked(&m, i, int64(10*i))
			want := rankedChunk{key: m.key, cv: cv, pos: i, start: int64(10 * i), rows: rc.rows, fragRank: sc.rcs[i/rankedBlock][i%rankedBlock].fragRank}
			if !reflect.DeepEqual(*rc, want) || len(rc.fragRank) != 3 || !reflect.DeepEqual(rc.rows, []int32{1, 4}) {
				t.Fatalf("query %d, chunk %d: %+v, want only what ranked knows", q, i, *rc)
			}
			// What later steps of the answer set.
			rc.ranks, rc.bounds, rc.boundsRead = []int32{1}, []int32{0, 9}, true
		}
		s.putScratch(sc)
		for b := range sc.rcs {
			for i := range sc.rcs[b] {
				if !reflect.ValueOf(sc.rcs[b][i]).IsZero() {
					t.Fatalf("after query %d, ranked chunk %d of block %d not zero: %+v", q, i, b, sc.rcs[b][i])
				}
			}
		}
	}
}

// noSpace is a VertexDst that lends nothing.
type noSpace struct{}

func (noSpace) VertexSpace(int) []byte { return nil }
