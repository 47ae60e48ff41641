package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
)

// pickCommand splits off the command name. Without one, the arguments are
// serve's: flags, or STOREs. A first argument that names no command and
// cannot be a store (no path separator, URL or name=, no store suffix,
// nothing of that name on disk) is a mistyped command.
func pickCommand(cmds map[string]cli.Command, args []string) (string, []string, error) {
	if len(args) == 0 {
		return "serve", args, nil
	}
	a := args[0]
	if _, ok := cmds[a]; ok {
		return a, args[1:], nil
	}
	if strings.HasPrefix(a, "-") || strings.ContainsAny(a, `/\=`) ||
		strings.HasSuffix(a, ".zarrvectors") || strings.HasSuffix(a, ".zarr") {
		return "serve", args, nil
	}
	if _, err := os.Stat(a); err == nil {
		return "serve", args, nil
	}
	msg := fmt.Sprintf("unknown command %q", a)
	if near := nearest(cmds, a); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return "", nil, fmt.Errorf("%s; to serve a store folder of that name, write ./%s", msg, a)
}

// nearest is the command within two edits of s (ties: alphabetical).
func nearest(cmds map[string]cli.Command, s string) string {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance with adjacent
// transpositions (so "inspcet" is one edit from "inspect").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
