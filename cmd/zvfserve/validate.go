package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
)

func validateCommand() cli.Command {
	return cli.Command{Summary: "check a store (structure, metadata, consistency, conventions, pyramid); exit 1 when invalid", Run: runValidate}
}

// errInvalid makes the command exit 1 after printing its report.
var errInvalid = errors.New("store is invalid")

const validateUsage = `Usage: zvfserve validate [--level 1..5] [--json] [--no-progress] STORE

Checks a store and lists every problem with its path instead of stopping at the first: 1 structure,
2 metadata (bounds with a min past its max are an error), 3 consistency (every chunk, fragment
index, manifest and link attribute cell, and that each chunk's rows lie in the cell its key names,
and on a bin-prefiltered level each fragment's in its bin's: a row outside is missed by boxes away
from that cell; reported with how many rows and the farthest; rows outside the store's bounds are a
warning, one a level), 4 conventions, 5 the pyramid. A problem found at many places (every object whose manifest names one
broken chunk) is listed once, with how many and the first five paths ("count" and "paths" in
--json). The verdict names the store's ZVF version and layout. Exit 0 when valid (warnings allowed),
1 when any error was found, 2 for a command-line mistake (a folder of stores is one: name one of
them).
`

func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("validate", validateUsage, stderr)
	level := fs.Int("level", 5, "checks up to this level: 1 structure, 2 metadata, 3 consistency, 4 conventions, 5 pyramid")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("no-progress", false, "do not draw the progress bar")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err // flag.ErrHelp, after the usage, exits 0
	}
	if fs.NArg() != 1 || *level < 1 || *level > 5 {
		return cli.Misuse(fs, "need one STORE and --level between 1 and 5")
	}
	name, target := storeArg(fs.Arg(0))
	st, err := openStore(ctx, target, localfs.Options{Logger: toolLogger(stderr)})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := folderOfStores(ctx, st, fs.Arg(0), "validate"); err != nil {
		return err
	}
	var progress func(int, int)
	if !*quiet {
		last := -1
		progress = func(done, total int) {
			if total < 200 {
				return // small stores finish before a bar helps
			}
			pct := done * 100 / total
			if pct == last {
				return
			}
			last = pct
			bar := pct / 4
			fmt.Fprintf(stderr, "\r[%-25s] %3d%% %d/%d chunks", string(repeatHash(bar)), pct, done, total)
			if done == total {
				fmt.Fprintln(stderr)
			}
		}
	}
	rep := zvf.Validate(ctx, st, name, *level, progress)
	if *asJSON {
		if rep.Problems == nil {
			rep.Problems = []zvf.Problem{} // a list for every consumer, even when empty
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		out := struct {
			OK bool `json:"ok"`
			*zvf.Report
		}{rep.OK(), rep}
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			where := p.Path
			if p.Count > 1 {
				// One problem found at many places: how many, and the first.
				where = fmt.Sprintf("%d× %s", p.Count, strings.Join(p.Paths, ", "))
				if p.Count > len(p.Paths) {
					where += ", …"
				}
			}
			fmt.Fprintf(stdout, "%-7s L%d  %s: %s\n", p.Severity, p.Check, where, p.Message)
		}
		verdict := "valid"
		if !rep.OK() {
			verdict = "INVALID"
		}
		format := ""
		if rep.ZVVersion != "" {
			format = fmt.Sprintf("ZVF %s, %s; ", rep.ZVVersion, rep.Layout)
		}
		found := ""
		if n := rep.Findings(); n != len(rep.Problems) {
			found = fmt.Sprintf(", found at %d places", n)
		}
		fmt.Fprintf(stdout, "%s: %s (%slevels 1-%d; %s, %s checked; %s%s)\n", shownArg(fs.Arg(0)), verdict, format, *level,
			counted(rep.Chunks, "chunk"), counted(rep.Objects, "object"), counted(len(rep.Problems), "problem"), found)
	}
	if !rep.OK() {
		return errInvalid
	}
	return nil
}

func repeatHash(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = '#'
	}
	return b
}

// counted is "1 problem", "2 problems".
func counted[N int | int64](n N, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
