package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/cql2"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// TestDocLimitsAreTheCode: each limit README.md and docs/ state as a
// number is the constant the code enforces. A row pairs a phrase of a
// page with the test of the constant it names; rewording a phrase, or
// changing a constant without its page, fails here.
func TestDocLimitsAreTheCode(t *testing.T) {
	t.Parallel()
	srv, err := New(Options{}) // with the defaults New applies
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		page, phrase string
		holds        bool
	}{
		{"docs/security.md", "Query strings over 4 KiB (besides a `cursor` of at most 1,024 characters) and paths over 1 KiB are 414", maxQuery == 4<<10 && maxCursor == 1024 && maxPath == 1<<10},
		{"openapi.yaml", "query string is over 4 KiB (not counting a\n    `cursor` parameter of at most 1,024 characters", maxQuery == 4<<10 && maxCursor == 1024},
		{"docs/security.md", "box corners must be finite and within ±1e300", cornerBound == 1e300},
		{"docs/security.md", "for the 84 connections the listeners hold past the cap (4 probe slots, 64 newcomers being read", ConnectionsPastCap == 84 && ProbeConnections == 4 && probePeeks == 64},
		{"docs/security.md", "others wait up to 2 s and then get 503", srv.o.QueueWait == 2*time.Second},
		{"openapi.yaml", "Every request slot (`--max-concurrent`) stayed busy for 2 s", srv.o.QueueWait == 2*time.Second},
		{"docs/security.md", "a `zarr.json`: 64 MiB", zarr.MaxMetadataBytes == 64<<20},
		{"docs/security.md", "`zarr.Limits.MaxChunkBytes` (default 256 MiB)", zarr.DefaultMaxChunkBytes == 256<<20},
		{"docs/security.md", "whole-array reads must fit `MaxReadBytes` (1 GiB)", zarr.DefaultMaxReadBytes == 1<<30},
		{"docs/security.md", "within 10 million entries and 10 minutes", localfs.DefaultMaxWalkEntries == 10_000_000 && localfs.DefaultMaxWalkTime == 10*time.Minute},
		{"docs/security.md", "a request body nobody reads is given 10 s", bodyTimeout == 10*time.Second},
		{"docs/security.md", "a JSON page holds at most 8 MiB of object ids and attribute values", jsonPageHold == 8<<20},
		{"docs/security.md", "hold less than the budget (at least 256 MiB)", minAnswerLimit == 256<<20},
		{"docs/security.md", "Answers stream (256 KiB buffered writes, 256 KiB held back)", lazyLimit == 256<<10},
		{"README.md", "(a JSON page also holds at most 8 MiB of object ids", jsonPageHold == 8<<20},
		{"README.md", "`--max-connections` | `ZVFSERVE_MAX_CONNECTIONS` | 4096", srv.o.MaxConnections == 4096},
		{"docs/security.md", "at most 16 connections (past that a new one is answered `503 overloaded` with `Retry-After`", AdminMaxConnections == 16},
		{"docs/security.md", "headers within 10 s and 16 KiB, answers within 5 minutes (pprof profiles shorter than that)", adminMaxHeaderBytes == 16<<10 && adminWriteTimeout == 5*time.Minute},
		{"docs/operations.md", "at most 2,048 such calls", localfs.DefaultMaxCalls == 2048},
		{"docs/filters.md", "At most 2,097,152 cells (128³)", zvf.MaxDensityCells == 2_097_152},
		{"docs/filters.md", "at most 64 KiB long and nested at most 64 deep", cql2.MaxLength == 64<<10 && cql2.MaxDepth == 64},
		{"docs/neuroglancer.md", "an\nannotation source of at least 1,000,000 annotations and a skeleton source of at least 1,000,000 objects", neuroglancer.AutoShardKeys == 1_000_000},
		{"docs/neuroglancer.md", "A shard build that would hold more than 256 MiB stops, and the shard is read from its\nlayout instead", neuroglancer.DefaultMaxShardBytes == 256<<20},
	} {
		b, err := os.ReadFile(filepath.Join("..", tc.page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.phrase) {
			t.Errorf("%s no longer says %q: update this test with the page", tc.page, tc.phrase)
		} else if !tc.holds {
			t.Errorf("%s says %q, but the code's limit differs", tc.page, tc.phrase)
		}
	}
}
