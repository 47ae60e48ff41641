package api

import (
	"encoding/json"
	"testing"
)

// TestQueryablePropJoin: what the whole-store queryables say of a property
// from its levels' schemas — the same type: one schema, integer ranges and
// labels joined; different stored types: a type every level's values fit
// and each level's own under x-zvf-by-level.
func TestQueryablePropJoin(t *testing.T) {
	t.Parallel()
	i8 := queryableProp{Type: "integer", Minimum: bigInt(-128), Maximum: bigInt(127), DType: "int8"}
	i32 := queryableProp{Type: "integer", Minimum: bigInt(-1 << 31), Maximum: bigInt(1<<31 - 1), DType: "int32"}
	ids := func(maxID int64) queryableProp {
		return queryableProp{Type: "integer", Minimum: bigInt(0), Maximum: bigInt(maxID)}
	}
	f32 := queryableProp{Type: "number", DType: "float32"}
	cat := func(labels ...string) queryableProp {
		return queryableProp{Type: "string", Enum: labels, DType: "uint8"}
	}
	for _, tc := range []struct {
		name   string
		levels []queryableProp
		want   string
	}{
		{"ids", []queryableProp{ids(5), ids(9), ids(2)},
			`{"title":"p","type":"integer","minimum":0,"maximum":9,"x-zvf-levels":[0,1,2]}`},
		{"labels", []queryableProp{cat("a", "b"), cat("c", "a")},
			`{"title":"p","type":"string","enum":["a","b","c"],"x-zvf-dtype":"uint8","x-zvf-levels":[0,1]}`},
		{"integer types", []queryableProp{i8, i32},
			`{"title":"p","description":"` + levelsDiffer + `","type":"integer","minimum":-2147483648,"maximum":2147483647,"x-zvf-levels":[0,1],` +
				`"x-zvf-by-level":{"0":{"type":"integer","minimum":-128,"maximum":127,"x-zvf-dtype":"int8"},"1":{"type":"integer","minimum":-2147483648,"maximum":2147483647,"x-zvf-dtype":"int32"}}}`},
		{"integer and float", []queryableProp{i8, f32, i8},
			`{"title":"p","description":"` + levelsDiffer + `","type":"number","x-zvf-levels":[0,1,2],` +
				`"x-zvf-by-level":{"0":{"type":"integer","minimum":-128,"maximum":127,"x-zvf-dtype":"int8"},"1":{"type":"number","x-zvf-dtype":"float32"},"2":{"type":"integer","minimum":-128,"maximum":127,"x-zvf-dtype":"int8"}}}`},
		{"categorical and float", []queryableProp{cat("a"), f32},
			`{"title":"p","description":"` + levelsDiffer + `","type":["number","string"],"x-zvf-levels":[0,1],` +
				`"x-zvf-by-level":{"0":{"type":"string","enum":["a"],"x-zvf-dtype":"uint8"},"1":{"type":"number","x-zvf-dtype":"float32"}}}`},
		// Levels 0 and 1 agree, 2 differs: every level is under x-zvf-by-level.
		{"agreeing, then not", []queryableProp{i8, i8, i32},
			`{"title":"p","description":"` + levelsDiffer + `","type":"integer","minimum":-2147483648,"maximum":2147483647,"x-zvf-levels":[0,1,2],` +
				`"x-zvf-by-level":{"0":{"type":"integer","minimum":-128,"maximum":127,"x-zvf-dtype":"int8"},"1":{"type":"integer","minimum":-128,"maximum":127,"x-zvf-dtype":"int8"},"2":{"type":"integer","minimum":-2147483648,"maximum":2147483647,"x-zvf-dtype":"int32"}}}`},
	} {
		q := tc.levels[0]
		q.Title, q.Levels = "p", []int{0}
		for n, p := range tc.levels[1:] {
			q.join(n+1, p)
		}
		b, err := json.Marshal(&q)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s (%v)", tc.name, b, tc.want, err)
		}
	}
}
