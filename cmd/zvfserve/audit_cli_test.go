package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestServeFlagsAfterStores: serve, like every other command (README:
// "Flags and arguments go in any order"), takes its flags after the
// STOREs. It used to stop parsing at the first STORE and took "--max-age"
// for a store's name.
func TestServeFlagsAfterStores(t *testing.T) {
	t.Parallel()
	s := startServe(t, graphStore, "--max-age", "7s")
	s.exitsClean(t)
	// A data route: the descriptor is no-cache (it names the version).
	code, body, h := httpGet(t, s.base+"/api/v1/stores/graph/levels/0/chunks")
	if code != http.StatusOK || h.Get("Cache-Control") != "public, max-age=7" {
		t.Fatalf("%d, Cache-Control %q: %.200s", code, h.Get("Cache-Control"), body)
	}
}

// TestServeDotAndFolderNames: "serve ." (in a store, or in a folder of
// stores) and a folder of stores whose own name is no store name serve
// what they hold; the folder's name is not a store's (README: a found
// store's name is its path relative to the argument). They were refused:
// store name "." (from "."): use name=URL.
func TestServeDotAndFolderNames(t *testing.T) {
	store := zvftest.CopyTree(t, graphStore)
	parent := t.TempDir()
	lab := filepath.Join(parent, "lab data")
	zvftest.CopyInto(t, graphStore, filepath.Join(lab, "graph.zarrvectors"))
	for _, tc := range []struct{ name, dir, arg string }{
		{"dot in a store", store, "."},
		{"dot slash in a store", store, "./"},
		{"dot in a folder of stores", lab, "."},
		{"folder with a space", parent, "lab data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(tc.dir)
			s := startServe(t, tc.arg)
			s.exitsClean(t)
			code, body, _ := httpGet(t, s.base+"/api/v1/stores")
			if code != http.StatusOK || !strings.Contains(body, `"name":"graph"`) {
				t.Fatalf("catalog: %d %.300s", code, body)
			}
		})
	}
	// The one-store commands name the store after its folder too.
	t.Chdir(store)
	if out, errs, code := runCmd(t, "inspect", "."); code != 0 || !strings.Contains(out, "store        graph\n") {
		t.Errorf("inspect .: exit %d: %s %.100s", code, errs, out)
	}
}

// TestServeDuplicateStoreNames: two STOREs that come to the same name are
// a command-line mistake (exit 2) that says how to tell them apart; it was
// exit 1 with only "two stores are named".
func TestServeDuplicateStoreNames(t *testing.T) {
	t.Parallel()
	a, b := zvftest.CopyTree(t, graphStore), zvftest.CopyTree(t, graphStore)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", a, b}, &out, &errs)
	if code != 2 || !strings.Contains(errs.String(), `two stores are named "graph"`) || !strings.Contains(errs.String(), "name=URL") {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
}

// TestServeRefusesOutOfRangeValues: a flag value the server cannot mean
// is a command-line mistake (exit 2) naming the flag, as a malformed one
// is; these were taken silently (--max-vertices 0 and -1 served pages of
// 1,000,000, --max-chunk-bytes 0 the 256 MiB default, a negative
// --revalidate or --settle as 0, a negative --cache-bytes as a memory
// limit below the headroom).
func TestServeRefusesOutOfRangeValues(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--max-vertices", "0"}, {"--max-vertices", "-1"}, {"--max-chunk-bytes", "0"}, {"--ng-max-shard-bytes", "0"}, {"--cache-bytes", "-5"},
		{"--revalidate", "-1s"}, {"--revalidate-walk", "-1s"}, {"--settle", "-1s"}, {"--read-concurrency", "-3"}, {"--max-age", "-1s"},
		{"--stall-timeout", "0s"}, {"--idle-timeout", "0s"}, {"--shutdown-grace", "0s"}, {"--max-concurrent", "0"}, {"--shutdown-delay", "-1s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out, errs bytes.Buffer
			code := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", graphStore}, args...), &out, &errs)
			if code != 2 || !strings.Contains(errs.String(), args[0]+" "+args[1]) {
				t.Fatalf("exit %d: %s", code, errs.String())
			}
			// Only the flag that is wrong: "--revalidate 1m0s,
			// --revalidate-walk 0s, --settle -1s and --max-age 1h0m0s
			// must not be negative" made the reader find it.
			if n := strings.Count(errs.String(), " --"); n != 1 {
				t.Errorf("the refusal names %d flags: %s", n, errs.String())
			}
		})
	}
}

// TestServeFlagsDocumented: every serve flag has a row in README's table
// that names the environment variable serve reads for it (applyEnv reads
// ZVFSERVE_NAME for every flag), and its --help says so too. The table
// said --demo-scale had none, though ZVFSERVE_DEMO_SCALE set it.
func TestServeFlagsDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		cells := strings.Split(line, "|")
		for _, f := range strings.Split(cells[1], ",") {
			rows[strings.Trim(strings.TrimSpace(f), "`")] = line
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	serveFlags(fs, &serveConfig{})
	fs.VisitAll(func(f *flag.Flag) {
		env := "ZVFSERVE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		row, ok := rows["--"+f.Name]
		if !ok {
			t.Errorf("README has no row for --%s", f.Name)
		} else if !strings.Contains(row, "`"+env+"`") {
			t.Errorf("README's row for --%s does not name %s: %s", f.Name, env, row)
		}
		if !strings.Contains(f.Usage, "env "+env) {
			t.Errorf("--%s's help does not name %s", f.Name, env)
		}
	})
}

// TestServeRefusesARelativePublicURL: --public-url must be an absolute
// http(s) URL; "example.com/zvf" was taken as it is and made the catalog's
// URLs, the Link headers and the Neuroglancer sources
// ("precomputed://example.com/zvf/ng/…") useless.
func TestServeRefusesARelativePublicURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"example.com/zvf", "/zvf", "ftp://example.com", "https://"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out, errs bytes.Buffer
		code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--public-url", u, graphStore}, &out, &errs)
		cancel()
		if code != 2 || !strings.Contains(errs.String(), "--public-url") {
			t.Errorf("--public-url %q: exit %d: %s", u, code, errs.String())
		}
	}
	s := startServe(t, "--public-url", "https://pub.example/zvf/", graphStore)
	s.exitsClean(t)
	if _, body, _ := httpGet(t, s.base+"/api/v1/stores"); !strings.Contains(body, `"url":"https://pub.example/zvf/api/v1/stores/graph"`) {
		t.Errorf("catalog: %.300s", body)
	}
}

// TestServeListenErrorsNameTheFlag: an address in use says which flag's
// it is; "listen tcp …: address already in use" did not tell --addr from
// --admin-addr. It also says what to do, without the socket call's
// chain ("--addr X: listen tcp X: bind: address already in use" was all).
func TestServeListenErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	busy := startServe(t, graphStore)
	addr := strings.TrimPrefix(busy.base, "http://")
	for _, tc := range []struct{ flag, args string }{
		{"--addr", "--addr " + addr},
		{"--admin-addr", "--addr 127.0.0.1:0 --admin-addr " + addr},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out, errs bytes.Buffer
		code := run(ctx, append([]string{"serve"}, append(strings.Fields(tc.args), graphStore)...), &out, &errs)
		cancel()
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		want := "zvfserve serve: " + tc.flag + " " + addr + ": the address is in use (another zvfserve, or another program, listens there): stop it, or give another, such as " + tc.flag + " " + net.JoinHostPort(host, strconv.Itoa(p+1)) + "\n"
		if code != 1 || !strings.HasSuffix(errs.String(), want) {
			t.Errorf("%s in use: exit %d: %s, want %q", tc.flag, code, errs.String(), want)
		}
	}
}

// TestServeAddrWithoutPort: --addr 8080 (a port alone, as other servers
// take it) failed with "listen tcp: address 8080: missing port in
// address" (exit 1). It is a command-line mistake saying the form wanted.
func TestServeAddrWithoutPort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"--addr 18080", "zvfserve serve: --addr 18080: want host:port, such as :18080 (every interface) or 127.0.0.1:18080\n"},
		{"--addr localhost", "zvfserve serve: --addr localhost: want host:port, such as localhost:8080\n"},
		{"--addr 127.0.0.1:0 --admin-addr 9090", "zvfserve serve: --admin-addr 9090: want host:port, such as :9090 (every interface) or 127.0.0.1:9090\n"},
	} {
		out, errs, code := runCmd(t, append(append([]string{"serve"}, strings.Fields(tc.args)...), graphStore)...)
		if code != 2 || !strings.HasSuffix(errs, tc.want) {
			t.Errorf("%s: exit %d: %s%s; want 2, %q", tc.args, code, out, errs, tc.want)
		}
	}
}

// stalledStore is storage whose every listing and stat waits for its
// caller to give up: a bucket that does not answer.
type stalledStore struct{ storage.Store }

func (s stalledStore) List(ctx context.Context, _ string) (storage.Listing, error) {
	<-ctx.Done()
	return storage.Listing{}, ctx.Err()
}

func (s stalledStore) Stat(ctx context.Context, _ string) (storage.Attrs, error) {
	<-ctx.Done()
	return storage.Attrs{}, ctx.Err()
}

// TestServeListensBeforeStoresOpen: an address in use is reported at
// once, even while the stores take long to open (many stores, a slow
// bucket). serve used to try the address only after every store had
// opened, so the mistake surfaced minutes later, or here never.
func TestServeListensBeforeStoresOpen(t *testing.T) {
	t.Parallel()
	busy := startServe(t, graphStore)
	addr := strings.TrimPrefix(busy.base, "http://")
	for _, args := range [][]string{
		{"--addr", addr},
		{"--addr", "127.0.0.1:0", "--admin-addr", addr},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out, errs syncBuffer
		start := time.Now()
		err := serve(ctx, append(args, graphStore), &out, &errs, serveHooks{wrapStore: func(st storage.Store) storage.Store { return stalledStore{st} }})
		cancel()
		if err == nil || !strings.Contains(err.Error(), args[len(args)-2]+" "+addr+": ") || time.Since(start) > 5*time.Second {
			t.Errorf("%v in use, the store stalled: %v after %v", args, err, time.Since(start))
		}
	}
}

// TestS3WithoutRegionFailsAtOnce: an s3:// URL with neither endpoint= nor
// a region (region=, AWS_REGION, a profile's) cannot be read at all: serve
// refuses it at start and the tools say what is missing. serve used to
// start and serve the store as "storage unavailable … Invalid region:
// region was not a valid DNS name", retrying it every --revalidate.
func TestS3WithoutRegionFailsAtOnce(t *testing.T) {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "s3://bucket/x.zarrvectors"},
		{"inspect", "s3://bucket/x.zarrvectors"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out, errs bytes.Buffer
		start := time.Now()
		code := run(ctx, args, &out, &errs)
		cancel()
		if code == 0 || !strings.Contains(errs.String(), "region=") || time.Since(start) > 10*time.Second {
			t.Errorf("%v: exit %d after %v: %s", args, code, time.Since(start), errs.String())
		}
	}
}

// TestCommandFlagsDocumented: README's Commands table names every flag
// each command's --help lists, and no flag the command lacks. Its row for
// validate left out --no-progress.
func TestCommandFlagsDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{} // command → its rows
	for _, line := range strings.Split(string(readme), "\n") {
		cmd, ok := strings.CutPrefix(line, "| `zvfserve ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(cmd, " ")
		rows[strings.Trim(name, "`")] = append(rows[strings.Trim(name, "`")], cmd)
	}
	flagName := regexp.MustCompile(`--([a-z][a-z-]*)`)
	for _, cmd := range []string{"demo", "inspect", "query", "validate"} {
		documented := map[string]bool{}
		for _, r := range rows[cmd] {
			for _, m := range flagName.FindAllStringSubmatch(r, -1) {
				documented[m[1]] = true
			}
		}
		if len(rows[cmd]) == 0 {
			t.Errorf("README's Commands table has no row for %s", cmd)
			continue
		}
		var out, errs bytes.Buffer
		if code := run(context.Background(), []string{cmd, "--help"}, &out, &errs); code != 0 {
			t.Fatalf("%s --help: exit %d: %s", cmd, code, errs.String())
		}
		help := out.String() + errs.String()
		usage, flags, ok := strings.Cut(help, "\nFlags:\n")
		if !ok {
			t.Fatalf("%s --help lists no flags:\n%s", cmd, help)
		}
		listed := map[string]bool{}
		for _, line := range strings.Split(flags, "\n") {
			if f, ok := strings.CutPrefix(line, "  -"); ok {
				name, _, _ := strings.Cut(f, " ")
				listed[name] = true
				if !documented[name] {
					t.Errorf("README's %s rows do not name --%s", cmd, name)
				}
				if !strings.Contains(usage, "--"+name) {
					t.Errorf("%s --help's usage line does not name --%s", cmd, name)
				}
			}
		}
		for name := range documented {
			if !listed[name] {
				t.Errorf("README names --%s for %s, which has no such flag", name, cmd)
			}
		}
	}
}

// TestErrorsEndWithOneSentence: README says errors are one sentence on
// stderr, its last line, with the usage before it when the call itself
// was wrong (a missing argument, an unknown flag or command), and exit 2
// for a command-line mistake, 1 otherwise. It said "one sentence" alone,
// though such calls print the usage first.
func TestErrorsEndWithOneSentence(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "none.zarrvectors")
	for _, tc := range []struct {
		args  []string
		code  int
		usage bool
	}{
		{[]string{"inspect"}, 2, true},
		{[]string{"inspect", "--bogus", graphStore}, 2, true},
		{[]string{"frobnicate"}, 2, true},
		{[]string{"query", graphStore, "--bbox", "1,2"}, 2, false},
		{[]string{"inspect", missing}, 2, false}, // a path that is not there: a mistake in the call
		{[]string{"query", graphStore}, 2, true}, // its --help says so too
		{[]string{"serve", "--log-level", "trace", graphStore}, 2, false},
	} {
		var out, errs bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errs)
		lines := strings.Split(strings.TrimRight(errs.String(), "\n"), "\n")
		last := lines[len(lines)-1]
		if code != tc.code || !strings.HasPrefix(last, "zvfserve") || !strings.Contains(last, ": ") {
			t.Errorf("%v: exit %d (want %d), last line %q", tc.args, code, tc.code, last)
		}
		if tc.args[0] == "serve" && !strings.Contains(last, "debug, info, warn or error") {
			t.Errorf("%v: %q does not say what the flag takes", tc.args, last) // as --help does
		}
		if usage := strings.Contains(errs.String(), "Usage:"); usage != tc.usage || (!tc.usage && len(lines) != 1) {
			t.Errorf("%v: usage printed %v (want %v), %d lines:\n%s", tc.args, usage, tc.usage, len(lines), errs.String())
		}
	}
}

// TestInspectJSONIsTheDescriptor: inspect --json prints the descriptor
// the server answers for the store, but for the members that are the
// server's URLs (its --help and docs/formats.md say so; they said "the
// descriptor" alone).
func TestInspectJSONIsTheDescriptor(t *testing.T) {
	t.Parallel()
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"inspect", "--json", graphStore}, &out, &errs); code != 0 {
		t.Fatalf("inspect --json: exit %d: %s", code, errs.String())
	}
	var printed map[string]any
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, graphStore)
	s.exitsClean(t)
	code, body, _ := httpGet(t, s.base+"/api/v1/stores/graph")
	var served map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &served) != nil {
		t.Fatalf("descriptor: %d %.300s", code, body)
	}
	for _, k := range []string{"queryables", "neuroglancer"} {
		if _, ok := printed[k]; ok {
			t.Errorf("inspect --json prints %s, a server's URL", k)
		}
		delete(served, k)
	}
	// The store version is the served store's (storage's revision), which
	// the served data paths are under; inspect reads no such thing.
	delete(served, "version")
	if !reflect.DeepEqual(printed, served) {
		t.Errorf("inspect --json:\n%s\nis not the served descriptor:\n%s", out.String(), body)
	}
}

// TestServeFrameAncestors: --frame-ancestors lets a notebook frame the
// viewer (its policy names the page); a list that would add a directive
// is a command-line mistake.
func TestServeFrameAncestors(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--frame-ancestors", "'self' http://localhost:8888", graphStore)
	s.exitsClean(t)
	_, _, h := httpGet(t, s.base+"/")
	if csp := h.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "frame-ancestors 'self' http://localhost:8888") || h.Get("X-Frame-Options") != "" {
		t.Errorf("Content-Security-Policy %q, X-Frame-Options %q", csp, h.Get("X-Frame-Options"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	if code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--frame-ancestors", "'self'; script-src *", graphStore}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "--frame-ancestors") {
		t.Errorf("exit %d: %s", code, errs.String())
	}
}

// TestMissingStorePathIsAUsageError: a STORE path that is not there is a
// command-line mistake (exit 2) named as it was typed. It was a failure
// (exit 1) reading "open store: lstat /…: no such file or directory".
func TestMissingStorePathIsAUsageError(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope", "store.zarrvectors")
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", missing},
		{"inspect", missing},
		{"validate", missing},
		{"query", "--bbox", "0,0,0,1,1,1", missing},
	} {
		out, errs, code := runCmd(t, args...)
		if code != 2 || !strings.Contains(errs, missing+": no such file or folder") || strings.Contains(errs, "lstat") {
			t.Errorf("%v: exit %d: %s%s", args[0], code, out, errs)
		}
	}
}

// TestFileStorePathIsAUsageError: a STORE that is a file, not a folder (a
// store's own zarr.json, a tarball), is a command-line mistake (exit 2)
// named as typed, saying what a STORE is. It was a failure (exit 1)
// reading "open store: /abs/path is not a directory".
func TestFileStorePathIsAUsageError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tarball := filepath.Join(dir, "brain.zarrvectors.tar")
	meta := filepath.Join(dir, "brain.zarrvectors", "zarr.json")
	for _, f := range []string{tarball, meta} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ arg, want string }{
		{tarball, tarball + ": a file, not a folder: a STORE is the folder that holds a store's zarr.json, or a folder of stores"},
		{meta, meta + ": a file, not a folder: a STORE is the folder that holds a store's zarr.json, or a folder of stores (here " + filepath.Dir(meta) + ")"},
	} {
		for _, args := range [][]string{
			{"serve", "--addr", "127.0.0.1:0", tc.arg},
			{"inspect", tc.arg},
			{"validate", tc.arg},
			{"query", "--bbox", "0,0,0,1,1,1", tc.arg},
		} {
			out, errs, code := runCmd(t, args...)
			if code != 2 || !strings.HasSuffix(errs, args[0]+": "+tc.want+"\n") {
				t.Errorf("%v %s: exit %d: %s%s", args[0], tc.arg, code, out, errs)
			}
		}
	}
}
