package cli

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestNewFlagSetUsage: --help prints the usage text, then "Flags:" and
// the flags only when the command has any, and is flag.ErrHelp (exit 0);
// a mistake prints the same and is an ErrUsage (exit 2).
func TestNewFlagSetUsage(t *testing.T) {
	t.Parallel()
	const usage = "Usage: x [--n N] ARG\n\nDoes x.\n"
	for _, tc := range []struct {
		name     string
		flags    bool
		args     []string
		want     string
		wantErr  error
		wantCode int
	}{
		{"help with flags", true, []string{"--help"}, usage + "\nFlags:\n  -n int\n    \tcount (default 3)\n", flag.ErrHelp, 0},
		{"help without flags", false, []string{"-h"}, usage, flag.ErrHelp, 0},
		{"unknown flag", true, []string{"--m", "1"}, "flag provided but not defined: -m\n" + usage + "\nFlags:\n  -n int\n    \tcount (default 3)\n", ErrUsage, 2},
		{"flags after arguments", true, []string{"ARG", "--n", "4"}, "", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			fs := NewFlagSet("x", usage, &stderr)
			if tc.flags {
				fs.Int("n", 3, "count")
			}
			err := ParseFlags(fs, tc.args)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if got := stderr.String(); got != tc.want {
				t.Errorf("printed %q, want %q", got, tc.want)
			}
			if code := Exit(context.Background(), &strings.Builder{}, "prog", "x", err); code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
		})
	}
}

// TestMisuse: arguments that parse but do not fit print the usage and are
// an ErrUsage (exit 2) that says what is wrong.
func TestMisuse(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	fs := NewFlagSet("x", "Usage: x ARG\n", &stderr)
	err := Misuse(fs, "need one ARG, got %d", 2)
	if !errors.Is(err, ErrUsage) || err.Error() != ErrUsage.Error()+": need one ARG, got 2" {
		t.Fatalf("error %v", err)
	}
	if got := stderr.String(); got != "Usage: x ARG\n" {
		t.Errorf("printed %q", got)
	}
	if code := Exit(context.Background(), &strings.Builder{}, "prog", "x", err); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
}
