// Command zvfserve serves ZVF (Zarr Vectors Format) stores over HTTP and
// carries the tools around them (inspect, query, validate, zarr-cat,
// demo). Each subcommand lives in its own file; this file only dispatches.
// The benchmarks are a command of their own, cmd/zvfbench.
package main

import (
	"context"
	"fmt"
	"io"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
)

// commands lists every subcommand. Keep it in step with README.md.
func commands() map[string]cli.Command {
	return map[string]cli.Command{
		"demo":     demoCommand(),
		"serve":    serveCommand(),
		"query":    queryCommand(),
		"inspect":  inspectCommand(),
		"zarr-cat": zarrCatCommand(),
		"validate": validateCommand(),
		"version":  versionCommand(),
	}
}

func main() { cli.Main(runProcess) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) > 0 {
		switch args[0] {
		case "-h", "--help", "help":
			usage(stdout, cmds)
			return 0
		case "--version", "-version":
			args = append([]string{"version"}, args[1:]...)
		}
	}
	name, args, err := pickCommand(cmds, args)
	if err != nil {
		// The usage, then the one sentence, as a subcommand's mistakes
		// print them: the error is the last line.
		usage(stderr, cmds)
		fmt.Fprintf(stderr, "\nzvfserve: %v\n", err)
		return 2
	}
	return cli.Exit(ctx, stderr, "zvfserve", name, cmds[name].Run(ctx, args, stdout, stderr))
}

func usage(w io.Writer, cmds map[string]cli.Command) {
	fmt.Fprintln(w, "zvfserve serves ZVF (Zarr Vectors Format) stores over HTTP.")
	fmt.Fprintln(w, "\nUsage:\n  zvfserve [command] [flags] [args]\n\nWith no command, zvfserve runs \"serve\" (on the built-in demo when no store is given).\n\nCommands:")
	cli.List(w, cmds)
	fmt.Fprintln(w, "\nRun \"zvfserve COMMAND --help\" for a command's flags.")
}
