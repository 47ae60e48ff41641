// Package cli is what the commands (zvfserve, zvfbench) share: subcommands
// with a summary each, flags and arguments in any order, and exit statuses
// that tell a command-line mistake (2) from a failure (1).
package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zvfserve/zvfserve/api/suggest"
)

// Command is one subcommand. Run gets the arguments after the
// subcommand's name; it writes results to stdout and diagnostics to
// stderr.
type Command struct {
	Summary string
	Run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// ErrUsage marks a command-line mistake: exit status 2, not 1.
var ErrUsage = errors.New("usage error")

// Main runs run on the process's arguments with a context that SIGINT and
// SIGTERM cancel (see Signals), and exits with the status it returns.
func Main(run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	ctx, stop := Signals()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Signals is a context that the first SIGINT or SIGTERM cancels. A second
// one ends the process at once, with the status a shell gives a process
// the signal killed (128 + its number), as an operator who presses Ctrl-C
// twice during a long shutdown (--shutdown-delay, --shutdown-grace)
// expects. stop stops listening.
func Signals() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(&Interrupted{Signal: s})
		case <-done:
			return
		}
		select {
		case s := <-ch:
			os.Exit((&Interrupted{Signal: s}).code())
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel(nil)
		})
	}
}

// Interrupted is the cause of the context Signals cancels: the signal
// that asked the command to stop.
type Interrupted struct{ Signal os.Signal }

func (e *Interrupted) Error() string {
	switch e.Signal {
	case os.Interrupt:
		return "SIGINT (Ctrl-C)"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return e.Signal.String()
}

// code is the status a shell gives a process the signal ended.
func (e *Interrupted) code() int {
	if n, ok := e.Signal.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// Exit is the status of prog's subcommand name ending with err, which it
// reports on stderr in one line: 0 for none or a --help (flag.ErrHelp;
// the usage was printed), 2 for ErrUsage, 128 + the signal's number for
// work a signal cut short (ctx's cause an *Interrupted: the user's doing,
// said as such rather than as "context canceled"), else 1.
func Exit(ctx context.Context, stderr io.Writer, prog, name string, err error) int {
	var in *Interrupted
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, context.Canceled) && errors.As(context.Cause(ctx), &in):
		fmt.Fprintf(stderr, "%s %s: stopped by %v before it finished\n", prog, name, in)
		return in.code()
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(stderr, "%s %s: %s\n", prog, name, strings.TrimPrefix(err.Error(), ErrUsage.Error()+": "))
		return 2
	}
	fmt.Fprintf(stderr, "%s %s: %v\n", prog, name, err)
	return 1
}

// List writes one line a command, its name and summary, sorted by name.
func List(w io.Writer, cmds map[string]Command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].Summary)
	}
}

// NewFlagSet is a subcommand's flag set, reporting to stderr. Its usage
// (printed for --help and for a command-line mistake) is usage, then, when
// the command has flags, "Flags:" and each flag with its default.
func NewFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(stderr, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// Misuse prints fs's usage and returns a command-line mistake (ErrUsage)
// saying what is wrong: the answer to arguments that parse but do not fit.
func Misuse(fs *flag.FlagSet, format string, a ...any) error {
	fs.Usage()
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// ParseFlags parses args with flags and positional arguments in any order
// ("query STORE --level 1" as "query --level 1 STORE"). A flag that takes
// a value takes the next argument whatever it looks like, so "--bbox
// -5,0,0,5,5,5" works; a bool flag takes none, so "--json STORE" leaves
// STORE positional. "--" ends the flags. It returns flag.ErrHelp for -h
// and --help (after printing the usage) and an ErrUsage otherwise.
func ParseFlags(fs *flag.FlagSet, args []string) error {
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
		if hasValue || f == nil || isBool(f) {
			// An unknown flag is left for fs.Parse to report.
			continue
		}
		if i+1 >= len(args) {
			// Else fs.Parse would take the "--" below for its value.
			return Misuse(fs, "--%s needs a value", name)
		}
		i++
		flags = append(flags, args[i])
	}
	// The flag package prints its own message of a mistake above the
	// usage; the one returned (explain's) says what to type instead, and
	// is the only one said. The usage goes out as it is.
	out := fs.Output()
	var held bytes.Buffer
	fs.SetOutput(&held)
	err := fs.Parse(append(flags, append([]string{"--"}, pos...)...))
	fs.SetOutput(out)
	said := held.Bytes()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		said = bytes.TrimPrefix(said, []byte(err.Error()+"\n"))
	}
	if _, werr := out.Write(said); werr != nil && err == nil {
		return werr
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %s", ErrUsage, explain(fs, err))
	}
	return nil
}

var (
	unknownFlag = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	badValue    = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-([^:]*): (.*)$`)
)

// explain rewrites the flag package's messages, which say what is wrong
// ("flag provided but not defined: -adr", "invalid value \"5\" for flag
// -max-age: parse error"), to say what to type instead: the flag meant,
// or the kind of value wanted. Flags are named as the usage spells them.
func explain(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		if near := nearestFlag(fs, m[1]); near != "" {
			return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", m[1], near)
		}
		return "unknown flag --" + m[1]
	}
	m := badValue.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	value, name, why := m[1], m[2], m[3]
	if f := fs.Lookup(name); f != nil {
		why = Want(f, why)
	}
	return fmt.Sprintf("--%s %s: %s", name, value, why)
}

// Want is what to say of a value f's Set refused with why: the kind of
// value f takes, for the flag package's own "parse error" and "value out
// of range" (which say nothing of it), else why as it is.
func Want(f *flag.Flag, why string) string {
	if why != "parse error" && why != "value out of range" {
		return why
	}
	var v any
	if g, ok := f.Value.(flag.Getter); ok {
		v = g.Get()
	}
	switch v.(type) {
	case time.Duration:
		return "want a duration such as 90s, 5m or 1h"
	case int, int64, uint, uint64:
		return "want a whole number"
	case float64:
		return "want a number"
	case bool:
		return "want true or false"
	}
	return why
}

// nearestFlag is the name of fs's flag that typed most likely misspells:
// one it begins (3 characters or more), or one at most two edits away; ""
// if none.
func nearestFlag(fs *flag.FlagSet, typed string) string {
	var names, begun []string
	fs.VisitAll(func(f *flag.Flag) {
		names = append(names, f.Name)
		if len(typed) >= 3 && strings.HasPrefix(f.Name, typed) {
			begun = append(begun, f.Name)
		}
	})
	if len(begun) == 1 {
		return begun[0]
	}
	return suggest.Nearest(typed, names)
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
