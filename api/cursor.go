package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/zvf"
)

// cursor is the opaque paging token: where the next page starts, bound to
// the query it came from by a hash so it cannot be replayed against
// another box, and to the store version it was issued by, so that its
// position never counts rows of another version. The position is a
// zvf.Resume: the page's first chunk and rank (so nothing before it is
// matched again) and the row counts of the chunks just before it, which
// the page's edges and faces need to index rows of earlier pages.
//
// The token is base64url of: a format byte (2), the 8-byte query hash,
// the level and the version (uvarint-prefixed), then the Resume. A token
// of format 1 (base64url JSON {"o","l","h","v"}: an offset alone, from
// servers before this format) is still accepted; its page is found by
// matching the rows before it again.
type cursor struct {
	Offset  int64       `json:"o"`
	Level   int         `json:"l"`
	Hash    string      `json:"h"`
	Version string      `json:"v"`
	Resume  *zvf.Resume `json:"-"`
}

// cursorFormat opens a token of the current format; a format 1 token
// starts with '{'.
const cursorFormat = 2

// maxCursor bounds a token's length; the encoder leaves out the oldest
// counts to stay within it.
const maxCursor = 1024

// encode returns the token for c (with its Resume).
func (c cursor) encode() string {
	h, _ := hex.DecodeString(c.Hash)
	b := make([]byte, 0, maxCursor*3/4)
	b = append(b, cursorFormat)
	b = append(b, h...)
	b = binary.AppendUvarint(b, uint64(c.Level))
	b = binary.AppendUvarint(b, uint64(len(c.Version)))
	b = append(b, c.Version...)
	b = c.Resume.Append(b, maxCursor*3/4-len(b))
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor checks a paging token against the query and store version
// it must belong to; "" is the first page.
func decodeCursor(v, hash, version string) (cursor, error) {
	if v == "" {
		return cursor{}, nil
	}
	var cur cursor // after the first page's return: it escapes (Unmarshal)
	bad := badRequest("cursor is not valid for this query")
	if len(v) > maxCursor {
		return cur, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) == 0 {
		return cur, bad
	}
	if b[0] == '{' {
		if json.Unmarshal(b, &cur) != nil || cur.Offset < 0 {
			return cursor{}, bad
		}
	} else {
		if cur, err = parseCursor(b); err != nil {
			return cursor{}, bad
		}
	}
	if cur.Hash != hash || cur.Level < 0 || cur.Level > zvf.MaxLevel {
		return cursor{}, bad
	}
	if cur.Version != version {
		return cursor{Level: cur.Level}, errCursorVersion // the level, for the walk's tag (bbox)
	}
	return cur, nil
}

// parseCursor reads a token of the current format.
func parseCursor(b []byte) (cursor, error) {
	var c cursor
	if len(b) < 9 || b[0] != cursorFormat {
		return c, errors.New("not a cursor")
	}
	c.Hash, b = hex.EncodeToString(b[1:9]), b[9:]
	level, n := binary.Uvarint(b)
	if n <= 0 || level > zvf.MaxLevel {
		return c, errors.New("bad level")
	}
	c.Level, b = int(level), b[n:]
	vl, n := binary.Uvarint(b)
	if n <= 0 || vl > uint64(len(b)-n) {
		return c, errors.New("bad version")
	}
	c.Version, b = string(b[n:n+int(vl)]), b[n+int(vl):]
	r, err := zvf.ParseResume(b)
	if err != nil {
		return c, err
	}
	c.Resume, c.Offset = r, r.Offset
	return c, nil
}

// errCursorVersion: a cursor of another store version than the one that
// is answering. It is stale, or, behind a load balancer, issued by a
// replica that saw the store's next version first; otherVersion tells
// (bbox: a newer version answers the request again, none is 409
// stale-cursor).
var errCursorVersion = errors.New("cursor of another store version")

// otherVersion checks the store now for a request that names another
// version than st's (what, e.g. "a cursor"): an error matching
// zvf.ErrChanged, which wrap retries, when that finds a newer version;
// the check's error; nil when st is still the version served.
func otherVersion(r *http.Request, st *zvf.Store, what string) error {
	a, ok := r.Context().Value(attemptKey).(*attempt)
	if !ok || a.h == nil {
		return nil
	}
	now, err := a.h.Sync(r.Context())
	switch {
	case err != nil:
		return err
	case now != st:
		return fmt.Errorf("store %q: a newer version opened for %s: %w", st.Name(), what, zvf.ErrChanged)
	}
	return nil
}

// appendCorner appends corner v with each number in its shortest
// spelling ("300.0" and "3e2" are "300"), or v as it is when it is not a
// list of numbers (parseCorner refuses it then).
func appendCorner(b []byte, v string) []byte {
	start := len(b)
	for rest, more := v, true; more; {
		var p string
		p, rest, more = strings.Cut(rest, ",")
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return append(b[:start], v...)
		}
		if len(b) > start {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, f, 'g', -1, 64)
	}
	return b
}

func queryHash(store string, q queryArgs) string {
	var buf [256]byte // on the stack for a usual query: no allocation
	b := append(buf[:0], store...)
	for _, p := range [...]string{"min", "max", "attributes", "level", "limit"} {
		v := q.Get(p)
		b = append(b, 0)
		switch {
		case p == "level" && v == "0":
			// The default, named: the same query as no level= (a cursor
			// of zvfserve query, which names it, continues over HTTP).
		case p == "min" || p == "max":
			b = appendCorner(b, v) // the same box however its numbers are spelled
		default:
			b = append(b, v...)
		}
	}
	// A selection changes the rows a position counts; it is added only
	// when it selects (sample=1 is no sample), so an unselected answer's
	// cursors are the same bytes with or without it, and as before.
	if f := q.Get("filter"); f != "" {
		b = append(append(append(append(b, "\x00filter="...), q.Get("filter-lang")...), 0), f...)
	}
	if sv := q.Get("sample"); sv != "" {
		if v, err := strconv.ParseFloat(sv, 64); err == nil && v != 1 {
			b = append(append(b, "\x00sample="...), sv...)
		}
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}
