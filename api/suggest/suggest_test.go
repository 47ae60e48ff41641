package suggest_test

import (
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api/suggest"
)

func TestDistance(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 65)
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"level", "level", 0},
		{"", "level", 5},
		{"levle", "level", 1}, // an adjacent swap is one edit
		{"inspcet", "inspect", 1},
		{"serv", "serve", 1},
		{"zarrcat", "zarr-cat", 1},
		{"attribute", "attributes", 1},
		{"kitten", "sitting", 3},
		{"lèvel", "level", 1}, // characters, not bytes
		{long, "a", 64},       // too long to compare
	} {
		if got := suggest.Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := suggest.Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	names := []string{"limit", "level", "min", "max"}
	for _, tc := range []struct{ s, want string }{
		{"levle", "level"},
		{"lmit", "limit"},
		{"mx", "max"},   // max before min: nearer (one edit against two)
		{"mun", "min"},  // one edit from min, two from max
		{"m", "min"},    // two edits from both: the first named
		{"density", ""}, // nothing within two edits
		{"", ""},
	} {
		if got := suggest.Nearest(tc.s, names); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
