package zvf

import (
	"math"
	"reflect"
	"testing"
)

func TestChunkBoundsOfKeys(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keys  []Key
		arity int
		shape []float64
		want  [][]float64
	}{
		{"none", nil, 3, []float64{1, 1, 1}, nil},
		{"one", []Key{{2, 3, 4}}, 3, []float64{10, 10, 10}, [][]float64{{20, 30, 40}, {30, 40, 50}}},
		{"spread", []Key{{-2, 0, 1}, {1, 5, 0}}, 3, []float64{2, 0.5, 4}, [][]float64{{-4, 0, 0}, {4, 3, 8}}},
		// An attribute-chunked level: the first component is not space.
		{"attribute-chunked", []Key{{7, 0, 0, 0}, {0, 1, 1, 1}}, 4, []float64{10, 10, 10}, [][]float64{{0, 0, 0}, {20, 20, 20}}},
		{"beyond float64", []Key{{math.MaxInt64, 0, 0}}, 3, []float64{math.MaxFloat64, 1, 1}, nil},
		{"a key of another arity", []Key{{0, 0, 0}, {0, 0}}, 3, []float64{1, 1, 1}, nil},
	} {
		if got := chunkBounds(tc.keys, tc.arity, 3, tc.shape); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
}
