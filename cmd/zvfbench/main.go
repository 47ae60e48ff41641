// Command zvfbench measures zvfserve: the load benchmark (viewport bursts of
// bbox requests), zvfserve against a static-file client, the store-size
// sweep and many whole-store answers at once. It is kept out of the
// zvfserve binary, which carries only what users run; docs/performance.md
// says what each benchmark shows and what bounds its numbers.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
)

// commands lists every benchmark. Keep it in step with README.md.
func commands() map[string]cli.Command {
	return map[string]cli.Command{
		"load":   loadCommand(),
		"static": staticCommand(),
		"sweep":  sweepCommand(),
		"whole":  wholeCommand(),
	}
}

func main() { cli.Main(run) }

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
		// The usage, then the sentence, as zvfserve and a benchmark's own
		// mistakes print them: the error is the last line.
		usage(stderr, cmds)
		fmt.Fprintf(stderr, "\nzvfbench: unknown benchmark %q\n", name)
		return 2
	}
	return cli.Exit(ctx, stderr, "zvfbench", name, c.Run(ctx, args[1:], stdout, stderr))
}

func usage(w io.Writer, cmds map[string]cli.Command) {
	fmt.Fprintln(w, "zvfbench measures zvfserve.")
	fmt.Fprintln(w, "\nUsage:\n  zvfbench BENCHMARK [flags]\n\nBenchmarks:")
	cli.List(w, cmds)
	fmt.Fprintln(w, "\nRun \"zvfbench BENCHMARK --help\" for a benchmark's flags. What the numbers mean: docs/performance.md.")
}

// parseFlags parses a benchmark's flags (cli.ParseFlags); the benchmarks
// take no arguments besides them.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return cli.Misuse(fs, "%s takes no arguments, only flags (got %q)", fs.Name(), fs.Args())
	}
	return nil
}
