// Command zvfbench measures zvfserve: the load benchmark (viewport bursts of
// bbox requests), zvfserve against a static-file client, the store-size
// sweep and many whole-store answers at once. It is kept out of the
// zvfserve binary, which carries only what users run; docs/performance.md
// says what each benchmark shows and what bounds its numbers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// command is one benchmark. run gets the arguments after its name; it
// writes the report to stdout and progress to stderr.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists every benchmark. Keep it in step with README.md.
func commands() map[string]command {
	return map[string]command{
		"load":   loadCommand(),
		"static": staticCommand(),
		"sweep":  sweepCommand(),
		"whole":  wholeCommand(),
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
	if len(args) == 0 {
		usage(stderr, cmds)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout, cmds)
		return 0
	}
	name := args[0]
	c, ok := cmds[name]
	if !ok {
		fmt.Fprintf(stderr, "zvfbench: unknown benchmark %q\n\n", name)
		usage(stderr, cmds)
		return 2
	}
	if err := c.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, errHelp) {
			return 0
		}
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "zvfbench %s: %s\n", name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
			return 2
		}
		fmt.Fprintf(stderr, "zvfbench %s: %v\n", name, err)
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "zvfbench measures zvfserve.")
	fmt.Fprintln(w, "\nUsage:\n  zvfbench BENCHMARK [flags]\n\nBenchmarks:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun \"zvfbench BENCHMARK --help\" for a benchmark's flags. What the numbers mean: docs/performance.md.")
}

// newFlags is a benchmark's flag set; --help prints usage (the usage
// lines and what the benchmark does) and then the flags.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage, "\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// errHelp ends a benchmark that was asked for its --help (printed by
// parseFlags): exit 0.
var errHelp = errors.New("help")

// parseFlags parses a benchmark's flags; the benchmarks take no
// arguments besides them.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("%w: %s takes no arguments, only flags (got %q)", errUsage, fs.Name(), fs.Args())
	}
	return nil
}
