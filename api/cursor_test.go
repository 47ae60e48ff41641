package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
)

func TestDecodeCursor(t *testing.T) {
	t.Parallel()
	enc := func(c cursor) string {
		b, _ := json.Marshal(c)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	const h, v = "0123456789abcdef", "v1"
	for _, tc := range []struct {
		name string
		v    string
		ok   bool
		want cursor
	}{
		{"first page", "", true, cursor{}},
		{"valid", enc(cursor{Offset: 1000, Level: 2, Hash: h, Version: v}), true, cursor{Offset: 1000, Level: 2, Hash: h, Version: v}},
		{"other query", enc(cursor{Offset: 1000, Hash: "ffffffffffffffff", Version: v}), false, cursor{}},
		{"other store version", enc(cursor{Offset: 1000, Hash: h, Version: "v0"}), false, cursor{}},
		{"negative offset", enc(cursor{Offset: -1, Hash: h}), false, cursor{}},
		{"negative level", enc(cursor{Level: -3, Hash: h}), false, cursor{}},
		{"not base64", "!!!", false, cursor{}},
		{"not json", base64.RawURLEncoding.EncodeToString([]byte("[1,2]")), false, cursor{}},
		{"overlong", string(make([]byte, 600)), false, cursor{}},
	} {
		got, err := decodeCursor(tc.v, h, v)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: %+v, %v", tc.name, got, err)
		}
		// Only a cursor of this query naming another version is left for
		// the handler to settle (stale, or from a replica ahead: 409 or
		// a retry); every other refusal is a 400.
		if p, isProblem := err.(*Problem); err != nil && (tc.name == "other store version") != errors.Is(err, errCursorVersion) ||
			err != nil && !errors.Is(err, errCursorVersion) && (!isProblem || p.Status != 400) {
			t.Errorf("%s: error %v", tc.name, err)
		}
	}
}

// FuzzDecodeCursor: any token is either a cursor for this query with a
// sane offset and level, a 400, or (for a cursor of this query naming
// another store version) errCursorVersion, which the handler settles —
// never a panic.
func FuzzDecodeCursor(f *testing.F) {
	f.Add("eyJvIjoxMDAwLCJsIjowLCJoIjoiMDEyMzQ1Njc4OWFiY2RlZiIsInYiOiJ2MSJ9")
	f.Add("eyJvIjoxMDAwLCJsIjowLCJoIjoiMDEyMzQ1Njc4OWFiY2RlZiIsInYiOiJ2MiJ9") // version v2
	f.Add("")
	f.Add("e30")
	f.Fuzz(func(t *testing.T, v string) {
		c, err := decodeCursor(v, "0123456789abcdef", "v1")
		if errors.Is(err, errCursorVersion) {
			var raw cursor
			b, _ := base64.RawURLEncoding.DecodeString(v)
			if json.Unmarshal(b, &raw) != nil || raw.Hash != "0123456789abcdef" || raw.Version == "v1" || raw.Offset < 0 || raw.Level < 0 || raw.Level > 1000 {
				t.Fatalf("%q: another version's cursor, but it is not a valid cursor of this query: %+v", v, raw)
			}
			return
		}
		if err != nil {
			if p, ok := err.(*Problem); !ok || p.Status != 400 {
				t.Fatalf("error is not a 400 problem: %v", err)
			}
			return
		}
		if v != "" && (c.Offset < 0 || c.Level < 0 || c.Level > 1000 || c.Hash != "0123456789abcdef" || c.Version != "v1") {
			t.Fatalf("accepted %+v", c)
		}
	})
}
