package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
)

// resumeAt is a page position of offset off with no counts before it.
func resumeAt(t testing.TB, off byte) *zvf.Resume {
	r, err := zvf.ParseResume([]byte{1, off, 0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDecodeCursor(t *testing.T) {
	t.Parallel()
	legacy := func(c cursor) string {
		b, _ := json.Marshal(c)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	const h, v = "0123456789abcdef", "v1"
	r := resumeAt(t, 100)
	for _, tc := range []struct {
		name string
		v    string
		ok   bool
		want cursor
	}{
		{"first page", "", true, cursor{}},
		{"valid", cursor{Level: 2, Hash: h, Version: v, Resume: r}.encode(), true, cursor{Offset: 100, Level: 2, Hash: h, Version: v, Resume: r}},
		{"format 1", legacy(cursor{Offset: 1000, Level: 2, Hash: h, Version: v}), true, cursor{Offset: 1000, Level: 2, Hash: h, Version: v}},
		{"other query", cursor{Hash: "ffffffffffffffff", Version: v, Resume: r}.encode(), false, cursor{}},
		{"other query, format 1", legacy(cursor{Offset: 1000, Hash: "ffffffffffffffff", Version: v}), false, cursor{}},
		{"other store version", cursor{Hash: h, Version: "v0", Resume: r}.encode(), false, cursor{}},
		{"other store version, format 1", legacy(cursor{Offset: 1000, Hash: h, Version: "v0"}), false, cursor{}},
		{"negative offset", legacy(cursor{Offset: -1, Hash: h}), false, cursor{}},
		{"negative level", legacy(cursor{Level: -3, Hash: h}), false, cursor{}},
		{"level past 1000", cursor{Level: 5000, Hash: h, Version: v, Resume: r}.encode(), true, cursor{Offset: 100, Level: 5000, Hash: h, Version: v, Resume: r}},
		{"level past the largest", cursor{Level: zvf.MaxLevel + 1, Hash: h, Version: v, Resume: r}.encode(), false, cursor{}},
		{"not a position", base64.RawURLEncoding.EncodeToString(append([]byte{2, 1, 35, 69, 103, 137, 171, 205, 239, 0, 2, 'v', '1'}, 9, 9)), false, cursor{}},
		{"version longer than the token", base64.RawURLEncoding.EncodeToString([]byte{2, 1, 35, 69, 103, 137, 171, 205, 239, 0, 90, 'v'}), false, cursor{}},
		{"not base64", "!!!", false, cursor{}},
		{"not json", base64.RawURLEncoding.EncodeToString([]byte("[1,2]")), false, cursor{}},
		{"overlong", string(make([]byte, maxCursor+1)), false, cursor{}},
	} {
		got, err := decodeCursor(tc.v, h, v)
		if (err == nil) != tc.ok || !sameCursor(got, tc.want) {
			t.Errorf("%s: %+v, %v", tc.name, got, err)
		}
		// Only a cursor of this query naming another version is left for
		// the handler to settle (stale, or from a replica ahead: 409 or
		// a retry); every other refusal is a 400.
		other := tc.name == "other store version" || tc.name == "other store version, format 1"
		if p, isProblem := err.(*Problem); err != nil && other != errors.Is(err, errCursorVersion) ||
			err != nil && !errors.Is(err, errCursorVersion) && (!isProblem || p.Status != 400) {
			t.Errorf("%s: error %v", tc.name, err)
		}
	}
}

func sameCursor(a, b cursor) bool {
	ra, rb := a.Resume, b.Resume
	a.Resume, b.Resume = nil, nil
	if a != b || (ra == nil) != (rb == nil) {
		return false
	}
	return ra == nil || string(ra.Append(nil, 1<<20)) == string(rb.Append(nil, 1<<20))
}

// TestCursorStaysShort: however many chunks precede a page, its token
// stays within maxCursor (the counts that do not fit are left out).
func TestCursorStaysShort(t *testing.T) {
	t.Parallel()
	b := []byte{1, 0xff, 0xff, 0xff, 0x7f, 0, 0}
	b = append(b, 0xe8, 0x07) // 1,000 counts of 200,000 rows
	for range 1000 {
		b = append(b, 0xc0, 0x9a, 0x0c)
	}
	r, err := zvf.ParseResume(b)
	if err != nil {
		t.Fatal(err)
	}
	c := cursor{Level: 3, Hash: "0123456789abcdef", Version: "fde847acfea14fae", Resume: r}
	tok := c.encode()
	if len(tok) > maxCursor || len(tok) < maxCursor-8 {
		t.Fatalf("token of %d bytes, want at most (and near) %d", len(tok), maxCursor)
	}
	got, err := decodeCursor(tok, c.Hash, c.Version)
	if err != nil || got.Offset != r.Offset || got.Level != 3 {
		t.Fatalf("%+v, %v", got, err)
	}
}

// FuzzDecodeCursor: any token is either a cursor for this query with a
// sane offset and level, a 400, or (for a cursor of this query naming
// another store version) errCursorVersion, which the handler settles —
// never a panic.
func FuzzDecodeCursor(f *testing.F) {
	f.Add("eyJvIjoxMDAwLCJsIjowLCJoIjoiMDEyMzQ1Njc4OWFiY2RlZiIsInYiOiJ2MSJ9") // format 1
	f.Add("eyJvIjoxMDAwLCJsIjowLCJoIjoiMDEyMzQ1Njc4OWFiY2RlZiIsInYiOiJ2MiJ9") // format 1, version v2
	f.Add(cursor{Level: 1, Hash: "0123456789abcdef", Version: "v1", Resume: resumeAt(f, 100)}.encode())
	f.Add(cursor{Level: 1, Hash: "0123456789abcdef", Version: "v2", Resume: resumeAt(f, 100)}.encode())
	f.Add("")
	f.Add("e30")
	f.Fuzz(func(t *testing.T, v string) {
		c, err := decodeCursor(v, "0123456789abcdef", "v1")
		if errors.Is(err, errCursorVersion) {
			b, _ := base64.RawURLEncoding.DecodeString(v)
			raw, perr := parseCursor(b)
			if len(b) > 0 && b[0] == '{' {
				perr = json.Unmarshal(b, &raw)
			}
			if perr != nil || raw.Hash != "0123456789abcdef" || raw.Version == "v1" || raw.Offset < 0 || raw.Level < 0 || raw.Level > 1000 {
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
		if c.Resume != nil && c.Resume.Offset != c.Offset {
			t.Fatalf("offset %d, position at %d", c.Offset, c.Resume.Offset)
		}
	})
}
