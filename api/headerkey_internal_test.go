package api

import (
	"net/textproto"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// TestHeaderKey: headerKey is textproto's canonical key, for the keys
// answers set (which it knows without a scan) and any other.
func TestHeaderKey(t *testing.T) {
	for _, k := range []string{"ETag", "Etag", "etag", "X-Request-Id", "Cache-Control", "Vary", "Server-Timing", "Content-Length",
		"Content-Type", "Content-Encoding", "X-Vertex-Count", "X-Number-Matched", "x-vertex-count", "Link", "X-Next-Cursor",
		"content-type", "Trailer", "a b", "", "X-Ünï"} {
		if got, want := headerKey(k), textproto.CanonicalMIMEHeaderKey(k); got != want {
			t.Errorf("headerKey(%q) = %q, want %q", k, got, want)
		}
	}
	alloctest.SkipUnderRace(t)
	if a := testing.AllocsPerRun(100, func() { _ = headerKey("ETag") }); a != 0 {
		t.Errorf("headerKey allocates %.0f times", a)
	}
}

// TestTrailerNamesCanonical: the lazy writer looks the headers an
// answer's end decides up by the names it is given, as they are: they
// must be canonical.
func TestTrailerNamesCanonical(t *testing.T) {
	for _, k := range bboxTrailers {
		if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
			t.Errorf("trailer %q is not canonical (%q)", k, c)
		}
	}
}
