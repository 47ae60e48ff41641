// Command zvfserve serves ZVF (Zarr Vectors Format) stores over HTTP and
// carries the tools around them (inspect, query, validate, zarr-cat,
// demo). Each subcommand lives in its own file; this file only dispatches.
// The benchmarks are a command of their own, cmd/zvfbench.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand's
// name; it writes results to stdout and diagnostics to stderr.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists every subcommand. Keep it in step with README.md.
func commands() map[string]command {
	return map[string]command{
		"demo":     demoCommand(),
		"serve":    serveCommand(),
		"query":    queryCommand(),
		"inspect":  inspectCommand(),
		"zarr-cat": zarrCatCommand(),
		"validate": validateCommand(),
	}
}

// errUsage marks a command-line mistake: exit status 2, not 1.
var errUsage = errors.New("usage error")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) > 0 {
		switch args[0] {
		case "-h", "--help", "help":
			usage(stdout, cmds)
			return 0
		}
	}
	name, args, err := pickCommand(cmds, args)
	if err != nil {
		fmt.Fprintf(stderr, "zvfserve: %v\n\n", err)
		usage(stderr, cmds)
		return 2
	}
	if err := cmds[name].run(ctx, args, stdout, stderr); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "zvfserve %s: %s\n", name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
			return 2
		}
		fmt.Fprintf(stderr, "zvfserve %s: %v\n", name, err)
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "zvfserve serves ZVF (Zarr Vectors Format) stores over HTTP.")
	fmt.Fprintln(w, "\nUsage:\n  zvfserve [command] [flags] [args]\n\nWith no command, zvfserve runs \"serve\" (on the built-in demo when no store is given).\n\nCommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun \"zvfserve COMMAND --help\" for a command's flags.")
}
