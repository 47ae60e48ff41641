package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// parseFlags parses args with flags and positional arguments in any order
// ("query STORE --level 1" as "query --level 1 STORE"). A flag that takes
// a value takes the next argument whatever it looks like, so "--bbox
// -5,0,0,5,5,5" works; a bool flag takes none, so "--json STORE" leaves
// STORE positional. "--" ends the flags. It returns flag.ErrHelp for -h
// and --help (after printing the usage) and a usage error otherwise.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if hasValue || f == nil || isBool(f) || i+1 >= len(args) {
			// An unknown flag is left for fs.Parse to report.
			continue
		}
		i++
		flags = append(flags, args[i])
	}
	if err := fs.Parse(append(flags, append([]string{"--"}, pos...)...)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// pickCommand splits off the command name. Without one, the arguments are
// serve's: flags, or STOREs. A first argument that names no command and
// cannot be a store (no path separator, URL or name=, no store suffix,
// nothing of that name on disk) is a mistyped command.
func pickCommand(cmds map[string]command, args []string) (string, []string, error) {
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
func nearest(cmds map[string]command, s string) string {
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
