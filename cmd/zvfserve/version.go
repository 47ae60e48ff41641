package main

import (
	"context"
	"fmt"
	"io"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cmd/internal/cli"
)

func versionCommand() cli.Command {
	return cli.Command{Summary: "print the version, VCS revision and Go version of this build", Run: runVersion}
}

const versionUsage = `Usage: zvfserve version (or zvfserve --version)

Prints which zvfserve this is: the module version (a tag, a pseudo-version from the commit, or
"(devel)" for a build without version control information), the VCS revision it was built from (with
", modified" when the tree had uncommitted changes) and its time, and the Go version. The server
reports the same as the zvfserve_build_info metric and in its start-up log line.
`

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("version", versionUsage, stderr)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err // flag.ErrHelp, after the usage, exits 0
	}
	if fs.NArg() != 0 {
		return cli.Misuse(fs, "version takes no arguments")
	}
	_, err := fmt.Fprintln(stdout, api.ReadBuild())
	return err
}
