// Package clitest holds what the commands' tests share.
package clitest

import (
	"strings"
	"testing"
)

// CheckHelp fails t unless help, what a subcommand's --help printed,
// has its usage line ("Usage: " then usage) and a description: at least
// one line of prose besides the usage line and the flag list.
func CheckHelp(t testing.TB, help, usage string) {
	t.Helper()
	if !strings.Contains(help, "Usage: "+usage) {
		t.Errorf("no usage line:\n%s", help)
	}
	prose := 0
	for _, l := range strings.Split(help, "\n") {
		if len(l) > 40 && !strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, "Usage:") {
			prose++
		}
	}
	if prose == 0 {
		t.Errorf("no description:\n%s", help)
	}
}
