package zvf

import (
	"reflect"
	"testing"
)

// TestChunkMatchReset: reset leaves no field of the previous chunk's
// match behind but the buffers and the pass's settings, and names every
// field of chunkMatch (a field added later must be sorted here too).
func TestChunkMatchReset(t *testing.T) {
	kept := map[string]bool{"pbuf": true, "copy": true, "vown": true, "bt": true, "cnt": true, "bytesOnly": true}
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
