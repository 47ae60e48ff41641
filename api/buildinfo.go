package api

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Build says which zvfserve is running: the main module's version (a tag,
// a pseudo-version made from the commit, or "(devel)" when the build had
// no version control information), the VCS revision and time it was built
// from, whether the tree had uncommitted changes, and the Go toolchain.
type Build struct {
	Version   string
	Revision  string // "" when unknown
	Time      string // the revision's commit time (RFC 3339), "" when unknown
	Modified  bool
	GoVersion string
}

// ReadBuild is the running binary's Build (debug.ReadBuildInfo).
func ReadBuild() Build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Build{Version: "unknown", GoVersion: runtime.Version()}
	}
	return BuildOf(bi)
}

// BuildOf reads a Build from build information.
func BuildOf(bi *debug.BuildInfo) Build {
	b := Build{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if b.Version == "" {
		b.Version = "unknown"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line zvfserve --version prints:
// "zvfserve VERSION (revision REV[, modified], TIME) GOVERSION".
func (b Build) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "zvfserve %s", b.Version)
	if b.Revision != "" {
		fmt.Fprintf(&sb, " (revision %s", b.Revision)
		if b.Modified {
			sb.WriteString(", modified")
		}
		if b.Time != "" {
			fmt.Fprintf(&sb, ", %s", b.Time)
		}
		sb.WriteString(")")
	}
	fmt.Fprintf(&sb, " %s", b.GoVersion)
	return sb.String()
}

// RevisionLabel is the revision as the log and the metrics name it:
// "unknown" rather than empty, so the two always agree.
func (b Build) RevisionLabel() string {
	if b.Revision == "" {
		return "unknown"
	}
	return b.Revision
}

// buildInfo is the zvfserve_build_info gauge: 1, labelled with the build.
func buildInfo(b Build) prometheus.Collector {
	rev := b.RevisionLabel()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "zvfserve_build_info",
		Help:        "Always 1; the labels say which zvfserve is running (module version, VCS revision, Go version).",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": rev, "goversion": b.GoVersion}})
	g.Set(1)
	return g
}
