package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

var updateObjects = flag.Bool("update-objects", false, "rewrite testdata/object-answers.sha256 from this code's answers")

// TestObjectAnswersUnchanged: the object route's answers — in binary,
// whose edges block the reader now builds in the wire's form, and in
// JSON — are byte for byte what they were when every edge went out
// through an int64 list narrowed by the encoder: the SHA-256 of the
// first objects of every demo store at every level against testdata
// written by that code. The in-process answer (zvfserve query --object)
// is the HTTP answer's body.
func TestObjectAnswersUnchanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stores, srv := pagingServer(t, 1<<40)
	var got bytes.Buffer
	for _, s := range stores {
		for _, n := range s.Levels() {
			l, err := s.Level(n)
			if err != nil {
				t.Fatal(err)
			}
			objects := min(l.Info().ObjectCount, 4)
			for row := range objects {
				id, err := l.ObjectIDAt(ctx, row)
				if err != nil {
					t.Fatal(err)
				}
				for _, format := range []string{"json", "bin"} {
					q := url.Values{"level": {fmt.Sprint(n)}, "attributes": {"*"}, "f": {format}}
					path := fmt.Sprintf("/api/v1/stores/%s/objects/%d?%s", s.Name(), id, q.Encode())
					code, _, body := serveFull(t, srv.Handler(), path)
					if code != http.StatusOK {
						t.Fatalf("%s: %d %.300s", path, code, body)
					}
					var in bytes.Buffer
					if err := srv.WriteObject(ctx, &in, s.Name(), id, q); err != nil {
						t.Fatalf("%s in process: %v", path, err)
					}
					if !bytes.Equal(in.Bytes(), body) {
						t.Errorf("%s: in process %d bytes, over HTTP %d, not the same", path, in.Len(), len(body))
					}
					fmt.Fprintf(&got, "%x %s\n", sha256.Sum256(body), path)
				}
			}
		}
	}
	checkGolden(t, "testdata/object-answers.sha256", got.String(), *updateObjects)
}
