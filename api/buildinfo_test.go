package api_test

import (
	"runtime/debug"
	"testing"

	"github.com/zvfserve/zvfserve/api"
)

// TestBuildOf: what a build's information becomes, as debug.BuildInfo
// prints it for a tagged release, a commit with local changes, and a
// build without version control information (the text after the Go
// version, which is recorded apart).
func TestBuildOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		goVersion, info string
		want            api.Build
		line            string
	}{
		{"go1.26.0", "path\tgithub.com/zvfserve/zvfserve/cmd/zvfserve\nmod\tgithub.com/zvfserve/zvfserve\tv1.4.0\t\n" +
			"build\tvcs=git\nbuild\tvcs.revision=0123456789abcdef0123456789abcdef01234567\nbuild\tvcs.time=2026-03-01T10:00:00Z\nbuild\tvcs.modified=false\n",
			api.Build{Version: "v1.4.0", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-03-01T10:00:00Z", GoVersion: "go1.26.0"},
			"zvfserve v1.4.0 (revision 0123456789abcdef0123456789abcdef01234567, 2026-03-01T10:00:00Z) go1.26.0"},
		{"go1.26.1", "path\tgithub.com/zvfserve/zvfserve/cmd/zvfserve\nmod\tgithub.com/zvfserve/zvfserve\tv0.0.0-20260301100000-0123456789ab+dirty\t\n" +
			"build\tvcs=git\nbuild\tvcs.revision=0123456789abcdef0123456789abcdef01234567\nbuild\tvcs.time=2026-03-01T10:00:00Z\nbuild\tvcs.modified=true\n",
			api.Build{Version: "v0.0.0-20260301100000-0123456789ab+dirty", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-03-01T10:00:00Z",
				Modified: true, GoVersion: "go1.26.1"},
			"zvfserve v0.0.0-20260301100000-0123456789ab+dirty (revision 0123456789abcdef0123456789abcdef01234567, modified, 2026-03-01T10:00:00Z) go1.26.1"},
		{"go1.26.0", "path\tgithub.com/zvfserve/zvfserve/cmd/zvfserve\nmod\tgithub.com/zvfserve/zvfserve\t(devel)\t\n",
			api.Build{Version: "(devel)", GoVersion: "go1.26.0"}, "zvfserve (devel) go1.26.0"},
	} {
		bi, err := debug.ParseBuildInfo(tc.info)
		if err != nil {
			t.Fatal(err)
		}
		bi.GoVersion = tc.goVersion // ParseBuildInfo leaves it to the binary's own record
		got := api.BuildOf(bi)
		if got != tc.want || got.String() != tc.line {
			t.Errorf("%+v %q; want %+v %q", got, got.String(), tc.want, tc.line)
		}
	}
}
