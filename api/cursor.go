package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/zvfserve/zvfserve/zvf"
)

// cursor is the opaque paging token: offset and level, bound to the query
// it came from by a hash so it cannot be replayed against another box, and
// to the store version it was issued by, so that its offset never counts
// rows of another version.
type cursor struct {
	Offset  int64  `json:"o"`
	Level   int    `json:"l"`
	Hash    string `json:"h"`
	Version string `json:"v"`
}

// decodeCursor checks a paging token against the query and store version
// it must belong to; "" is the first page.
func decodeCursor(v, hash, version string) (cursor, error) {
	var cur cursor
	if v == "" {
		return cur, nil
	}
	if len(v) > 512 {
		return cur, badRequest("cursor is not valid for this query")
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || json.Unmarshal(b, &cur) != nil || cur.Hash != hash || cur.Offset < 0 || cur.Level < 0 || cur.Level > 1000 {
		return cursor{}, badRequest("cursor is not valid for this query")
	}
	if cur.Version != version {
		return cursor{}, errCursorVersion
	}
	return cur, nil
}

// errCursorVersion: a cursor of another store version than the one that
// is answering. It is stale, or, behind a load balancer, issued by a
// replica that saw the store's next version first; cursorVersion tells.
var errCursorVersion = errors.New("cursor of another store version")

// cursorVersion answers a request whose cursor names another version than
// st's: the store is checked now (see zvf.Handle.Sync); if that finds a
// newer version, the request is answered again from it (the error
// matches zvf.ErrChanged, which wrap retries), while it settles the
// answer is 503 store-changing, and a cursor of no version served now is
// 409 stale-cursor.
func cursorVersion(r *http.Request, st *zvf.Store) error {
	a, ok := r.Context().Value(attemptKey).(*attempt)
	if !ok || a.h == nil {
		return staleCursor()
	}
	now, err := a.h.Sync(r.Context())
	switch {
	case err != nil:
		return err
	case now != st:
		return fmt.Errorf("store %q: a newer version opened for a cursor: %w", st.Name(), zvf.ErrChanged)
	}
	return staleCursor()
}

func queryHash(store string, q url.Values) string {
	h := sha256.Sum256([]byte(store + "\x00" + q.Get("min") + "\x00" + q.Get("max") + "\x00" + q.Get("attributes") + "\x00" + q.Get("level") + "\x00" + q.Get("limit")))
	return hex.EncodeToString(h[:8])
}
