package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/zvfserve/zvfserve/api/suggest"
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
	return suggest.Nearest(s, names)
}
