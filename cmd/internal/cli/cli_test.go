package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
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
		// The usage alone: the error says the mistake (TestFlagMistakesShowOneMessage).
		{"unknown flag", true, []string{"--m", "1"}, usage + "\nFlags:\n  -n int\n    \tcount (default 3)\n", ErrUsage, 2},
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

// TestFlagMistakesSayWhatToDo: a misspelt flag used to end in "flag
// provided but not defined: -adr", and a value of the wrong kind in
// "invalid value \"5\" for flag -max-age: parse error", which say what is
// wrong but not what to type instead. Now the last line names the flag as
// it is spelt on the command line and the flag meant, or the kind of value
// wanted.
func TestFlagMistakesSayWhatToDo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--adr", ":1"}, "unknown flag --adr (did you mean --addr?)"},
		{[]string{"--maxvertices", "5"}, "unknown flag --maxvertices (did you mean --max-vertices?)"},
		{[]string{"--max-vert", "5"}, "unknown flag --max-vert (did you mean --max-vertices?)"},
		{[]string{"--max-vertices", "99999999999999999999"}, `--max-vertices "99999999999999999999": want a whole number`},
		{[]string{"--colour"}, "unknown flag --colour"},
		{[]string{"--max-age", "5"}, `--max-age "5": want a duration such as 90s, 5m or 1h`},
		{[]string{"--max-vertices", "1e6"}, `--max-vertices "1e6": want a whole number`},
		{[]string{"--scale=big"}, `--scale "big": want a number`},
		{[]string{"--json=yes"}, `--json "yes": want true or false`},
		{[]string{"--addr"}, "--addr needs a value"},
	} {
		fs := NewFlagSet("x", "Usage: x\n", io.Discard)
		fs.String("addr", ":8080", "")
		fs.Duration("max-age", time.Hour, "")
		fs.Int("max-vertices", 1, "")
		fs.Float64("scale", 1, "")
		fs.Bool("json", false, "")
		err := ParseFlags(fs, tc.args)
		var stderr strings.Builder
		if code := Exit(context.Background(), &stderr, "prog", "x", err); code != 2 || stderr.String() != "prog x: "+tc.want+"\n" {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestFlagMistakesShowOneMessage: the flag package prints its own message
// ("invalid value \"10\" for flag -start-wait: parse error", "flag
// provided but not defined: -adr") before the usage, so a mistake showed
// that line above the usage and the line saying what to type below it,
// two messages for one mistake, the first the one TestFlagMistakesSayWhatToDo
// replaced. The usage is printed, and only the explained message is said.
func TestFlagMistakesShowOneMessage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--start-wait", "10"}, {"--adr", ":1"}, {"--json=yes"}, {"---x"}} {
		var out strings.Builder
		fs := NewFlagSet("x", "Usage: x\n", &out)
		fs.String("addr", ":8080", "the address")
		fs.Duration("start-wait", time.Second, "")
		fs.Bool("json", false, "")
		err := ParseFlags(fs, args)
		if !errors.Is(err, ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
			continue
		}
		got := out.String()
		if !strings.HasPrefix(got, "Usage: x\n") || !strings.Contains(got, "the address") {
			t.Errorf("%v: printed %q, want the usage and its flags", args, got)
		}
		for _, raw := range []string{"parse error", "provided but not defined", "invalid value", "invalid boolean value", "bad flag syntax"} {
			if strings.Contains(got, raw) {
				t.Errorf("%v: printed the flag package's own %q above the usage: %q (the error says %q)", args, raw, got, err)
			}
		}
	}
	// -h prints the usage as before.
	var out strings.Builder
	fs := NewFlagSet("x", "Usage: x\n", &out)
	fs.String("addr", ":8080", "the address")
	if err := ParseFlags(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(out.String(), "Usage: x\n") || !strings.Contains(out.String(), "the address") {
		t.Errorf("-h: %v, printed %q", err, out.String())
	}
}
