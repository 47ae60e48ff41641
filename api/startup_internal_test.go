package api

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The patterns validHost and ValidStoreName were once compiled from, at
// every process start. They stay here as the definition the hand-written
// checks must agree with (compiled when a test needs them: a package-level
// variable would be initialisation that TestInitCheap counts).
const (
	hostSpec  = `^([A-Za-z0-9]([A-Za-z0-9.-]{0,253})?|\[[0-9A-Fa-f:.]{2,45}\])(:[0-9]{1,5})?$`
	storeSpec = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`
)

// checkNames compares the hand-written checks with their patterns on s.
func checkNames(t *testing.T, host, store *regexp.Regexp, s string) {
	t.Helper()
	if got, want := validHost(s), host.MatchString(s); got != want {
		t.Errorf("validHost(%q) = %v, want %v", s, got, want)
	}
	if got, want := ValidStoreName(s), store.MatchString(s); got != want {
		t.Errorf("ValidStoreName(%q) = %v, want %v", s, got, want)
	}
}

var nameCases = []string{
	"", "a", "A", "0", "-", ".", "_", "a-b.c_d", "localhost", "localhost:8080", "localhost:", "localhost:123456",
	"localhost:12345", "host:8x", "host:80:80", "a..b", "-a", "a-", "[::1]", "[::1]:443", "[::1", "[]", "[:]",
	"[1]", "[::1]x", "[::1]:", "[::g]", "[fe80::1%eth0]", "[" + strings.Repeat("0", 45) + "]",
	"[" + strings.Repeat("0", 46) + "]", strings.Repeat("a", 127), strings.Repeat("a", 128),
	strings.Repeat("a", 129), strings.Repeat("a", 254), strings.Repeat("a", 255), strings.Repeat("a", 254) + ":1",
	"é", "aé", "a b", "a\n", "a/b", "a@b", "a:b", ":80", "1.2.3.4:5", "x_y", "x_y:1", "a.b:00000",
}

func TestValidHostAndStoreName(t *testing.T) {
	host, store := regexp.MustCompile(hostSpec), regexp.MustCompile(storeSpec)
	for _, s := range nameCases {
		checkNames(t, host, store, s)
	}
}

func FuzzValidHostAndStoreName(f *testing.F) {
	for _, s := range nameCases {
		f.Add(s)
	}
	host, store := regexp.MustCompile(hostSpec), regexp.MustCompile(storeSpec)
	f.Fuzz(func(t *testing.T, s string) { checkNames(t, host, store, s) })
}

// TestInitCheap: every process that links this package (zvfserve's every
// command) runs its package initialisation before main, so it must do
// almost nothing — no regexp compiled, no table built. The test binary is
// run again with GODEBUG=inittrace=1, which reports each package's
// initialisation allocations.
func TestInitCheap(t *testing.T) {
	if os.Getenv("ZVF_INIT_CHILD") != "" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInitCheap$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "ZVF_INIT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	const pkg = "init github.com/zvfserve/zvfserve/api @"
	for line := range strings.Lines(string(out)) {
		if !strings.HasPrefix(line, pkg) {
			continue
		}
		// init P @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(line)
		allocs, err := strconv.Atoi(f[len(f)-2])
		if err != nil {
			t.Fatalf("unexpected inittrace line %q", line)
		}
		if allocs > 100 {
			t.Errorf("package api's initialisation made %d allocations (at most 100): %s", allocs, line)
		}
		return
	}
	t.Fatalf("no inittrace line for package api in:\n%s", out)
}
