package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	stdlog "log"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/web"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/storage/metered"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

func serveCommand() cli.Command {
	return cli.Command{Summary: "serve stores over HTTP (the default; with no STORE, the built-in demo)", Run: runServe}
}

// serveConfig holds the flags; each has an environment variable.
type serveConfig struct {
	addr, publicURL, cors, logFormat, logLevel, adminAddr string
	readiness, frameAncestors                             string
	token, tokenFile                                      string
	cacheBytes, maxVertices, maxChunkBytes                int64
	maxAge, timeout, streamTimeout, stallTimeout          time.Duration
	idleTimeout, shutdownGrace, shutdownDelay, revalidate time.Duration
	startWait                                             time.Duration
	revalidateWalk, settle                                time.Duration
	maxConcurrent, readConcurrency, maxConnections        int
	// readCap, when > 0, bounds the default chunk reads a query (see
	// fitReads): the open-file limit did not fit the defaults.
	readCap                           int
	demoScale                         float64
	followSymlinks, trustProxyHeaders bool
	ngSharded                         neuroglancer.ShardMode
	ngMaxShardBytes                   int64
}

func serveFlags(fs *flag.FlagSet, c *serveConfig) {
	fs.StringVar(&c.addr, "addr", ":8080", "listen address (env ZVFSERVE_ADDR)")
	fs.StringVar(&c.publicURL, "public-url", "", "public base URL (absolute, http or https) used in Link headers, the catalog and the descriptor's Neuroglancer sources (env ZVFSERVE_PUBLIC_URL)")
	fs.BoolVar(&c.trustProxyHeaders, "trust-proxy-headers", false, "without --public-url, build the descriptor's absolute Neuroglancer URLs from the Forwarded or X-Forwarded-Proto and X-Forwarded-Host headers; set it only behind a proxy that sets them (by default the URLs use the request's Host) (env ZVFSERVE_TRUST_PROXY_HEADERS)")
	fs.Int64Var(&c.cacheBytes, "cache-bytes", 512<<20, "byte budget of decoded chunks (with the JSON text of their vertices, prepared for a chunk the second time a text answer needs it) and of what answers being written hold, which share it (the cache evicts to make room; while answers hold it all, at least 256 MiB, new requests wait, then get 503); unless GOMEMLIMIT is set, the process's soft memory limit is this plus 256 MiB (env ZVFSERVE_CACHE_BYTES)")
	fs.StringVar(&c.cors, "cors-origins", "*", "comma-separated allowed CORS origins, * for any (env ZVFSERVE_CORS_ORIGINS)")
	fs.DurationVar(&c.maxAge, "max-age", time.Hour, "Cache-Control max-age of data responses (env ZVFSERVE_MAX_AGE)")
	fs.DurationVar(&c.timeout, "request-timeout", 30*time.Second, "time limit for the work before an answer starts (then 504); an answer that has started streams on, under --stream-timeout, each stretch of work between two writes to the client (waiting on the client not counted) under this limit again, then cut (env ZVFSERVE_REQUEST_TIMEOUT)")
	fs.DurationVar(&c.streamTimeout, "stream-timeout", 10*time.Minute, "hard cap on a response's whole time, streaming included; a response still streaming then is cut (env ZVFSERVE_STREAM_TIMEOUT)")
	fs.DurationVar(&c.revalidate, "revalidate", time.Minute, "how often to check each store's metadata (root and level zarr.json, the levels, where a linked folder points) for a new version, and to retry stores that failed to open; each store on its own, the stores' checks spread over the interval, each check ending after this or 2m, whichever is longer; costs a listing and a stat per level, whatever the store's size; 0: never, and stores are taken as immutable, their listing as whole: answers do not look for chunks a lagging listing left out (env ZVFSERVE_REVALIDATE)")
	fs.DurationVar(&c.revalidateWalk, "revalidate-walk", 0, "also list every object of every store this often, in the background, to notice data rewritten without its metadata, and name each version by that listing (once more at start) so that restarts and replicas tell rewritten data apart; costs a listing of the whole store; each walk ends after this or 2m, whichever is longer; 0: never; needs --revalidate above 0 (env ZVFSERVE_REVALIDATE_WALK)")
	fs.DurationVar(&c.settle, "settle", 2*time.Second, "how long a changed store must be quiet before its new version is served (positive); meanwhile requests that need changed objects get 503 with Retry-After (env ZVFSERVE_SETTLE)")
	fs.BoolVar(&c.followSymlinks, "follow-symlinks", false, "let symbolic links in local stores lead outside the store's folder (by default such links are refused) (env ZVFSERVE_FOLLOW_SYMLINKS)")
	fs.DurationVar(&c.stallTimeout, "stall-timeout", 10*time.Second, "a response whose client takes nothing for this long is cut and its connection freed (while it waits on its client it holds no --max-concurrent slot) (env ZVFSERVE_STALL_TIMEOUT)")
	fs.IntVar(&c.maxConnections, "max-connections", 4096, "open client connections; at the cap the one idle longest — a keep-alive connection between requests, or one that has sent nothing for a second — is closed for a new one; with none such the new one gets one of 4 slots past the cap that answer only /healthz and /readyz (anything else 503; each closed after its answer and within 2s; with all 4 taken, a new one whose request line is a probe's closes the oldest whose request has not been read, and any other is refused), and while all 4 are answering it is refused (a refused connection is answered 503 with Retry-After, then closed); must fit the open-file limit (env ZVFSERVE_MAX_CONNECTIONS)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", time.Minute, "keep-alive connections idle this long are closed (env ZVFSERVE_IDLE_TIMEOUT)")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 15*time.Second, "on SIGTERM or SIGINT, /readyz turns false and requests in flight get this long to finish; then their connections are closed and serve exits, whatever storage is doing; a second signal exits at once (env ZVFSERVE_SHUTDOWN_GRACE)")
	fs.DurationVar(&c.startWait, "start-wait", 10*time.Second, "at start, how long serve waits before it listens: for each STORE's backend to answer the listing that tells a store from a folder of stores (all at once; one that has not answered is served as one store, with a warning), then for the stores to open, within what is left, at least a quarter of it (one still opening answers 502 and keeps /readyz false until it opens); keep 1.25 times it under the liveness probe's patience (env ZVFSERVE_START_WAIT)")
	fs.DurationVar(&c.shutdownDelay, "shutdown-delay", 0, "on SIGTERM or SIGINT, keep serving this long with /readyz false (and keep-alive off) before the listeners close, so that load balancers polling /readyz stop sending first; --shutdown-grace follows; 0: close at once (env ZVFSERVE_SHUTDOWN_DELAY)")
	fs.Int64Var(&c.maxChunkBytes, "max-chunk-bytes", zarr.DefaultMaxChunkBytes, "largest decoded chunk a store may declare (shape × item size, checked when an array opens) or produce (variable-length data); a store needing more is refused with a 422 (env ZVFSERVE_MAX_CHUNK_BYTES)")
	fs.Int64Var(&c.maxVertices, "max-vertices", 1_000_000, "vertices per response; larger answers are paged (a JSON page also holds at most 8 MiB of object ids and attribute values, and a page of any format with edge_attributes at most 8 MiB of their stored values, counted from the edges its rows carry, so pages of wide attributes and dense graphs are smaller), and an object or Neuroglancer cell, skeleton or mesh over it is a 413; a chunk tile is always its whole chunk (env ZVFSERVE_MAX_VERTICES)")
	fs.IntVar(&c.readConcurrency, "read-concurrency", 0, "chunks read at once per query; 0: 8 for local folders, 32 for object stores, whose round trips dominate (lowered, when not set, where the open-file limit leaves no room for connections; see --max-concurrent) (env ZVFSERVE_READ_CONCURRENCY)")
	fs.IntVar(&c.maxConcurrent, "max-concurrent", 64, "requests at work at once (a response blocked on a slow client gives its slot back while it waits); more wait briefly, then get 503; with the reads each keeps (--read-concurrency) it must fit the open-file limit (ulimit -n): when not set and the defaults do not fit (an object store's 64 × 32 under 1,024), it is lowered, then --read-concurrency, so that reads keep at most half the descriptors, and the values chosen are logged (env ZVFSERVE_MAX_CONCURRENT)")
	c.ngSharded = neuroglancer.ShardAuto
	fs.Var(&c.ngSharded, "ng-sharded", fmt.Sprintf("serve Neuroglancer annotation sources (spatial index and by_id) and skeletons as sharded sources (neuroglancer_uint64_sharded_v1 shard files read by Range): always, never, or auto — an annotation source of at least %d annotations, a skeleton source of at least %d objects (env ZVFSERVE_NG_SHARDED)", neuroglancer.AutoShardKeys, neuroglancer.AutoShardKeys))
	fs.Int64Var(&c.ngMaxShardBytes, "ng-max-shard-bytes", neuroglancer.DefaultMaxShardBytes, "bytes one Neuroglancer shard build may hold: a larger shard is read a chunk at a time from its layout, and a single chunk (a cell or skeleton) stored larger is a 413 (env ZVFSERVE_NG_MAX_SHARD_BYTES)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json (env ZVFSERVE_LOG_FORMAT)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error (env ZVFSERVE_LOG_LEVEL)")
	// The token's default is not taken from the environment here, so that
	// --help never prints it; resolveToken reads ZVFSERVE_TOKEN.
	fs.StringVar(&c.token, "token", "", "require this bearer token (scheme Bearer, any case) on every route but /healthz, /readyz and the viewer's page and files (env ZVFSERVE_TOKEN, read without surrounding white space; set but empty, it is refused; on the command line it is visible in the process list: prefer the variable or --token-file)")
	fs.StringVar(&c.tokenFile, "token-file", "", "read the bearer token from this file (surrounding white space is ignored) (env ZVFSERVE_TOKEN_FILE)")
	fs.StringVar(&c.adminAddr, "admin-addr", "", "listen address for /metrics and /debug/pprof, which answer there without the token: bind it where only your monitoring reaches (127.0.0.1:9090, a pod port no Service exposes; at most 16 connections); when set, /metrics is served there only, not on --addr, and /healthz and /readyz there too, for probes that must get through while --addr is at --max-connections (env ZVFSERVE_ADMIN_ADDR; empty: off)")
	fs.StringVar(&c.readiness, "readiness", "all", "when /readyz is 200: all (every store serves; a store that fails to open keeps the replica unready and is named in the 503) or any (at least one store serves) (env ZVFSERVE_READINESS)")
	fs.StringVar(&c.frameAncestors, "frame-ancestors", "", "pages that may show the viewer in a frame, as Content-Security-Policy sources separated by spaces: \"'self' http://localhost:8888\" lets a Jupyter notebook there embed it in an IFrame; empty: none may (env ZVFSERVE_FRAME_ANCESTORS)")
	fs.Float64Var(&c.demoScale, "demo-scale", 1, "scale of the built-in demo served when no STORE is given (env ZVFSERVE_DEMO_SCALE)")
}

// check refuses flag values serve cannot run with (a usage error, exit 2),
// rather than serving with a default the operator did not ask for.
func (c *serveConfig) check() error {
	if c.timeout <= 0 || c.streamTimeout < c.timeout {
		return fmt.Errorf("%w: --request-timeout %v must be positive and no longer than --stream-timeout %v", cli.ErrUsage, c.timeout, c.streamTimeout)
	}
	// Each refusal names the flags that are wrong, and only those.
	var bad []string
	need := func(ok bool, flag string, v any) {
		if !ok {
			bad = append(bad, fmt.Sprintf("--%s %v", flag, v))
		}
	}
	refuse := func(what string) error {
		if len(bad) == 0 {
			return nil
		}
		return fmt.Errorf("%w: %s %s", cli.ErrUsage, strings.Join(bad, ", "), what)
	}
	need(c.stallTimeout > 0, "stall-timeout", c.stallTimeout)
	need(c.idleTimeout > 0, "idle-timeout", c.idleTimeout)
	need(c.shutdownGrace > 0, "shutdown-grace", c.shutdownGrace)
	need(c.startWait > 0, "start-wait", c.startWait)
	need(c.maxConcurrent > 0, "max-concurrent", c.maxConcurrent)
	if err := refuse("must be positive"); err != nil {
		return err
	}
	if err := web.CheckFrameAncestors(c.frameAncestors); err != nil {
		return fmt.Errorf("%w: --frame-ancestors %w", cli.ErrUsage, err)
	}
	if c.readiness != "all" && c.readiness != "any" {
		return fmt.Errorf("%w: --readiness %q: all or any", cli.ErrUsage, c.readiness)
	}
	need(c.maxVertices >= 1, "max-vertices", c.maxVertices)
	need(c.maxChunkBytes >= 1, "max-chunk-bytes", c.maxChunkBytes)
	need(c.ngMaxShardBytes >= 1, "ng-max-shard-bytes", c.ngMaxShardBytes)
	if err := refuse("must be at least 1"); err != nil {
		return err
	}
	need(c.cacheBytes >= 0, "cache-bytes", c.cacheBytes)
	need(c.readConcurrency >= 0, "read-concurrency", c.readConcurrency)
	need(c.revalidate >= 0, "revalidate", c.revalidate)
	need(c.revalidateWalk >= 0, "revalidate-walk", c.revalidateWalk)
	need(c.settle >= 0, "settle", c.settle)
	need(c.maxAge >= 0, "max-age", c.maxAge)
	need(c.shutdownDelay >= 0, "shutdown-delay", c.shutdownDelay)
	if err := refuse("must not be negative"); err != nil {
		return err
	}
	if c.settle == 0 {
		// The reader takes a settle of 0 for its 2 s default.
		return fmt.Errorf("%w: --settle 0: a changed store must be quiet for a while before its new version opens; give a positive duration (default 2s)", cli.ErrUsage)
	}
	if c.revalidate == 0 && c.revalidateWalk > 0 {
		// With --revalidate 0 stores are immutable: nothing is checked, so
		// the walk would never run.
		return fmt.Errorf("%w: --revalidate-walk %v needs checks: with --revalidate 0 stores are served as immutable and never walked", cli.ErrUsage, c.revalidateWalk)
	}
	if c.publicURL != "" {
		// The catalog, Link headers and Neuroglancer sources are built on
		// it: without a scheme and host they lead nowhere.
		u, err := url.Parse(c.publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: --public-url %q: want an absolute http or https URL such as https://data.example.org/zvf", cli.ErrUsage, c.publicURL)
		}
	}
	return nil
}

// applyEnv gives every flag not set on the command line the value of its
// environment variable, ZVFSERVE_ and the flag's name in capitals with _
// for - (--cache-bytes: ZVFSERVE_CACHE_BYTES), parsed as the flag would
// be, so a malformed variable is an error at start, not a silent default.
// skip names flags read elsewhere (the token, which --help must not show
// and resolveToken reads).
func applyEnv(fs *flag.FlagSet, lookup func(string) (string, bool), skip ...string) error {
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if onCommandLine[f.Name] || slices.Contains(skip, f.Name) {
			return
		}
		name := "ZVFSERVE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := lookup(name)
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %s", name, v, cli.Want(f, err.Error())))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", cli.ErrUsage, errors.Join(errs...))
	}
	return nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level %q (debug, info, warn or error)", cli.ErrUsage, level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("%w: --log-format %q (text or json)", cli.ErrUsage, format)
}

// storeArg splits "name=URL" (the name defaults to the last path element
// without .zarrvectors / .zarr; for a URL of a scheme alone, "mem://", the
// scheme).
func storeArg(arg string) (name, target string) {
	if i := strings.IndexByte(arg, '='); i > 0 && !strings.Contains(arg[:i], "/") && !strings.Contains(arg[:i], ":") {
		return arg[:i], arg[i+1:]
	}
	p := arg
	if j := strings.IndexByte(p, '?'); j >= 0 {
		p = p[:j]
	}
	base := path.Base(strings.TrimRight(strings.ReplaceAll(p, "\\", "/"), "/"))
	if (base == "." || base == ".." || base == "/") && !strings.Contains(arg, "://") {
		// "." or "..": the folder's own name ("serve ." in a store).
		if abs, err := filepath.Abs(arg); err == nil {
			base = filepath.Base(abs)
		}
	}
	if scheme, ok := strings.CutSuffix(base, ":"); ok && strings.HasSuffix(p, scheme+"://") {
		// A URL with neither host nor path ("mem://"): its scheme.
		base = scheme
	}
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".zarrvectors"), ".zarr")
	return base, arg
}

// openStores opens every STORE argument, or builds the demo into memory.
// A URL that cannot be opened at all is a usage error; a store whose
// contents do not open (corrupt, unsupported, backend down) is served as
// that error and retried every --revalidate, so one bad store never takes
// the others down.
func openStores(ctx context.Context, args []string, c *serveConfig, ch *cache.Cache, m *api.Metrics, log *slog.Logger, hooks serveHooks) ([]*zvf.Handle, func(), error) {
	codecs := zarr.NewCodecs(zarr.Limits{MaxChunkBytes: c.maxChunkBytes})
	// One budget for the whole start: the arguments' first listings run
	// at once, each within it, and the stores' opens get what is left, or
	// a quarter of it if more, so that a store beside a hung argument
	// still gets time to open before serve listens.
	wait := c.startWait
	deadline := time.Now().Add(wait)
	openWait := func() time.Duration { return max(time.Until(deadline), wait/4) }
	var stores []*zvf.Handle
	var closers []func() error
	closeAll := func() {
		for _, f := range closers {
			_ = f()
		}
	}
	var watched []bool
	// Only the handles are made here; openFirst opens them, so that one
	// store whose backend hangs cannot keep serve from listening.
	open := func(name string, st storage.Store, watch bool, conc int) {
		if hooks.wrapStore != nil {
			st = hooks.wrapStore(st)
		}
		// Transient backend failures are retried by the cloud SDKs (jittered
		// exponential backoff); local files have none to retry.
		h := zvf.NewHandle(metered.Wrap(st, m),
			zvf.Options{Name: name, Cache: ch, Codecs: codecs, Logger: log, Concurrency: conc}, zvf.Watch{Enabled: watch, Settle: c.settle, Walk: watch && c.revalidateWalk > 0})
		stores = append(stores, h)
		watched = append(watched, watch)
	}
	// opened opens the handles made (see openFirst); the stores it
	// returns close only once their opens have ended.
	opened := func() ([]*zvf.Handle, func(), error) {
		// Closing the stores ends their opens first, however serve ends.
		octx, stopOpens := context.WithCancel(ctx)
		opening := openFirst(octx, stores, watched, checkTimeout(c.revalidate), openWait(), c.revalidate, log)
		closeStores := func() {
			stopOpens()
			opening()
			// The stores' background work (level-table builds) ends
			// before the storage it reads is closed.
			for _, h := range stores {
				_ = h.Close()
			}
			closeAll()
		}
		if err := ctx.Err(); err != nil {
			closeStores()
			return nil, nil, err
		}
		return stores, closeStores, nil
	}
	if len(args) == 0 {
		start := time.Now()
		mem, err := blobstore.Open(ctx, "mem://")
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, mem.Close)
		infos, err := demo.Build(ctx, mem, demo.Options{Seed: 1, Scale: c.demoScale})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		for _, in := range infos {
			open(in.Name, storage.Sub(mem, in.Prefix), false, c.reads("mem://"))
		}
		log.Info("serving the built-in demo", "stores", len(infos), "build_ms", time.Since(start).Milliseconds())
		return opened()
	}
	badName := func(name, a string) error {
		closeAll()
		return badStoreName(name, a)
	}
	from := map[string]string{} // store name: the argument it came from
	named := func(name, a string) error {
		if prev, dup := from[name]; dup {
			return fmt.Errorf("%w: two stores are named %q (from %q and %q): name them with name=URL", cli.ErrUsage, name, shownArg(prev), shownArg(a))
		}
		from[name] = a
		return nil
	}
	per, err := lookAtArgs(ctx, args, c, log, hooks, &closers)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	for i, a := range args {
		name, target := storeArg(a)
		arg, found, err := per[i].arg, per[i].found, per[i].err
		if errors.Is(err, errNoStoreBelow) {
			// Served, it was one store answering every route with "no
			// root zarr.json"; and a folder is searched for stores only
			// here, so stores written below it later would never be.
			err = fmt.Errorf("%w: %s (searched for stores only at start: start serve once one is written there)", cli.ErrUsage, noStoreMessage(target))
		} else if errors.Is(err, errNoStoreNear) {
			err = fmt.Errorf("%w: %s", cli.ErrUsage, noStoreNearMessage(target))
		} else if err != nil {
			err = fmt.Errorf("%s: %w", shownArg(target), err)
		}
		for _, f := range found {
			if err == nil {
				err = named(f.name, a)
			}
			if err == nil {
				open(f.name, storage.Sub(arg, f.prefix), c.revalidate > 0, c.reads(target))
			}
		}
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		if found != nil {
			continue
		}
		if !api.ValidStoreName(name) {
			return nil, nil, badName(name, a)
		}
		if err := named(name, a); err != nil {
			closeAll()
			return nil, nil, err
		}
		open(name, arg, c.revalidate > 0, c.reads(target))
	}
	return opened()
}

// argStore is one STORE argument's storage, opened, and the stores its
// first listing found below it (none: it is one store).
type argStore struct {
	arg   storage.Store
	found []foundStore
	err   error
}

// lookAtArgs opens each argument's storage in order (no backend call yet;
// each one's Close is added to closers), then asks their first listings
// all at once within c.startWait: a folder of stores serves each of them
// (discover.go), and backends that do not answer cost the start one wait,
// not one each.
func lookAtArgs(ctx context.Context, args []string, c *serveConfig, log *slog.Logger, hooks serveHooks, closers *[]func() error) ([]argStore, error) {
	// One bound on blocked file system calls for every folder served:
	// threads are the process's, and one hung mount may hold them all.
	calls := localfs.NewCalls(0)
	per := make([]argStore, len(args))
	for i, a := range args {
		name, target := storeArg(a)
		// A name given (name=URL) must be one; a folder of stores does
		// not use its own default name, only a store served as one does.
		if target != a && !api.ValidStoreName(name) {
			return nil, badStoreName(name, a)
		}
		st, err := openStore(ctx, target, localfs.Options{FollowSymlinks: c.followSymlinks, Logger: log.With("store", name), Calls: calls})
		if err != nil {
			return nil, err
		}
		*closers = append(*closers, st.Close)
		per[i].arg = st
		if hooks.wrapArg != nil {
			per[i].arg = hooks.wrapArg(st)
		}
	}
	var looks sync.WaitGroup
	for i, a := range args {
		looks.Go(func() {
			per[i].found, per[i].err = discoverStoresWithin(ctx, per[i].arg, namePrefix(a), log.With("arg", shownArg(a)), c.startWait)
		})
	}
	looks.Wait()
	return per, nil
}

// badStoreName is the refusal of a store name given (name=URL) that is
// none.
func badStoreName(name, a string) error {
	return fmt.Errorf("%w: store name %q (from %q): use name=URL with letters, digits, '.', '_', '-'", cli.ErrUsage, name, shownArg(a))
}

// shownArg is a STORE argument as errors show it: without its query
// string, whose parameters may carry credentials (as blobstore's errors
// leave it out).
func shownArg(a string) string {
	if i := strings.IndexByte(a, '?'); i >= 0 {
		return a[:i+1] + "…"
	}
	return a
}

// firstOpens is how many stores open at once at start: a store whose
// backend hangs holds one of them until its deadline, not every store
// after it.
const firstOpens = 8

// openFirst opens the stores (each handle's first Refresh), firstOpens at
// once and each within timeout, and returns once all have opened or
// failed, or ctx has ended, or wait has passed: stores still opening then
// go on in the background, served meanwhile as not open yet (502, and
// /readyz names them). A store that fails to open is served as its
// problem and, with revalidate above 0, retried by the checks. done waits
// for the opens (they end with ctx).
func openFirst(ctx context.Context, stores []*zvf.Handle, watched []bool, timeout, wait, revalidate time.Duration, log *slog.Logger) (done func()) {
	var mu sync.Mutex
	opening := map[string]bool{} // under mu
	for _, h := range stores {
		opening[h.Name()] = true
	}
	var all sync.WaitGroup
	all.Go(func() {
		var each sync.WaitGroup
		defer each.Wait()
		slots := make(chan struct{}, firstOpens)
		for i, h := range stores {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			each.Go(func() {
				defer func() { <-slots }()
				octx, cancel := context.WithTimeout(ctx, timeout)
				_, err := h.Refresh(octx)
				cancel()
				mu.Lock()
				delete(opening, h.Name())
				mu.Unlock()
				switch {
				case err == nil || ctx.Err() != nil:
				case watched[i]:
					// One bad store never stops serve: it is listed and answers
					// with its problem; only checks (--revalidate) retry it.
					log.Error("store does not open; serving its error and retrying", "store", h.Name(), "every", revalidate, "err", err)
				default:
					log.Error("store does not open; serving its error", "store", h.Name(), "err", err, "retry", "not retried (--revalidate 0): restart to serve it once fixed")
				}
			})
		}
	})
	finished := make(chan struct{})
	go func() {
		all.Wait()
		close(finished)
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-finished:
	case <-ctx.Done():
	case <-t.C:
		mu.Lock()
		names := slices.Sorted(maps.Keys(opening))
		mu.Unlock()
		const most = 20 // a folder of stores may hold thousands
		list := strings.Join(names[:min(len(names), most)], ", ")
		if len(names) > most {
			list += fmt.Sprintf(" and %d more", len(names)-most)
		}
		log.Warn("listening while stores still open; they answer 502 and keep /readyz false until they do", "opening", len(names), "stores", list, "waited", wait, "deadline", timeout)
	}
	return all.Wait
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// Logging is best effort: when whatever reads standard error goes
	// away (a log shipper restarting, `| tee` killed), a log write fails
	// with EPIPE instead of the Go runtime ending the server with SIGPIPE,
	// which it does for fd 1 and 2 even when the signal was ignored at
	// start (systemd's IgnoreSIGPIPE=yes). The other commands keep the
	// default: `zvfserve query … | head` should stop quietly.
	signal.Ignore(syscall.SIGPIPE)
	return serve(ctx, args, stdout, stderr, serveHooks{libraryLogs: true})
}

// serveHooks let tests reach under serve: wrapStore wraps every store's
// storage as it is opened (to make reads hang, say).
type serveHooks struct {
	wrapStore func(storage.Store) storage.Store
	wrapArg   func(storage.Store) storage.Store // wraps each STORE argument's storage, before the search for stores below it
	// libraryLogs routes the log package's and gRPC's output through the
	// server's logger (process globals: set by runServe, not by tests).
	libraryLogs bool
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer, hooks serveHooks) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c serveConfig
	serveFlags(fs, &c)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: zvfserve serve [flags] [STORE...]")
		fmt.Fprintln(stderr, "\nServes ZVF stores over HTTP: the API under /api/v1 (see /openapi.yaml), Neuroglancer sources under\n/ng/STORE (docs/neuroglancer.md) and the viewer at /.")
		fmt.Fprintln(stderr, "\nSTORE is a local path or a URL (file://, mem://, s3://bucket/path?endpoint=…&use_path_style=true&region=…,")
		fmt.Fprintln(stderr, "gs://, azblob://), optionally as name=URL. With no STORE the built-in demo is served.")
		fmt.Fprintln(stderr, "A folder or prefix that is not a store itself serves every store below it (up to 8 levels deep,")
		fmt.Fprintln(stderr, "hidden folders and links back to a folder above skipped), named by its relative path with '.'")
		fmt.Fprintln(stderr, "for '/': a/b.zarrvectors is \"a.b\"; name=FOLDER serves them as \"name.a.b\". The folder is")
		fmt.Fprintln(stderr, "searched once, at start; one that holds no Zarr metadata in it or below it is refused (exit 2).\n\nFlags:")
		fs.PrintDefaults()
	}
	// Flags and STOREs in any order, as every command takes them.
	if err := cli.ParseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := applyEnv(fs, os.LookupEnv, "token"); err != nil {
		return err
	}
	log, err := newLogger(stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	if hooks.libraryLogs {
		routeLibraryLogs(log)
	}
	if err := c.check(); err != nil {
		return err
	}
	if c.maxConnections, err = connectionCap(fs, &c, log); err != nil {
		return err
	}
	if err := resolveToken(fs, &c, log); err != nil {
		return err
	}
	ch := cache.New(c.cacheBytes)
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		// With the cache full, the collector's default pacing (GOGC=100)
		// lets the heap grow to twice the live data: a soft limit keeps
		// the process near the cache budget plus what requests in flight
		// use.
		limit := c.cacheBytes + memoryHeadroom
		debug.SetMemoryLimit(limit)
		log.Debug("memory limit", "bytes", limit)
	}
	// Listen before the stores open (minutes, for many stores on a slow
	// bucket): an address in use is found at once, not after them.
	ln, aln, err := listen(&c)
	if err != nil {
		return err
	}
	defer func() {
		// The servers close them first when they ran; a second close only
		// reports that.
		_ = ln.Close()
		if aln != nil {
			_ = aln.Close()
		}
	}()
	metrics := api.NewMetrics()
	stores, closeStores, err := openStores(ctx, fs.Args(), &c, ch, metrics, log, hooks)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// A SIGTERM or SIGINT while start-up waited on the stores: a
			// stop asked for, as after start, not a failure.
			log.Info("stopped before listening: signalled while the stores were being listed and opened")
			return nil
		}
		return err
	}
	storesOpen := true
	defer func() {
		if storesOpen {
			closeStores()
		}
	}()
	var origins []string
	for _, o := range strings.Split(c.cors, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	srv, err := api.New(api.Options{Handles: stores, Cache: ch, Metrics: metrics, Logger: log, CORSOrigins: origins,
		MaxAge: c.maxAge, RequestTimeout: c.timeout, StreamTimeout: c.streamTimeout, StallTimeout: c.stallTimeout,
		MaxConnections: c.maxConnections, IdleTimeout: c.idleTimeout, MaxVertices: c.maxVertices, MaxConcurrent: c.maxConcurrent,
		Token: c.token, PublicURL: strings.TrimRight(c.publicURL, "/"), NGSharded: c.ngSharded, NGMaxShardBytes: c.ngMaxShardBytes, TrustProxyHeaders: c.trustProxyHeaders, UI: web.Handler(web.Options{FrameAncestors: c.frameAncestors}),
		ReadyAny: c.readiness == "any", AdminMetrics: c.adminAddr != ""})
	if err != nil {
		return err
	}
	// Every request's context derives from base, so that when the grace
	// period ends the work of requests still running is cancelled.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	hs, limited := srv.HTTPServer(ln)
	hs.ErrorLog = serverErrorLog(log)
	hs.BaseContext = func(net.Listener) context.Context { return base }
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(limited) }()
	servers := []*http.Server{hs}
	if aln != nil {
		admin, alimited := adminServer(srv, aln, log)
		admin.BaseContext = hs.BaseContext
		go func() { errc <- admin.Serve(alimited) }()
		servers = append(servers, admin)
		log.Info("admin listening", "addr", aln.Addr().String())
	}
	checked := make(chan struct{})
	stopChecks := func() {}
	if c.revalidate > 0 && len(fs.Args()) > 0 {
		rctx, stop := context.WithCancel(ctx)
		stopChecks = stop
		go func() {
			defer close(checked)
			var walks sync.WaitGroup
			if c.revalidateWalk > 0 {
				walks.Go(func() { srv.Revalidate(rctx, c.revalidateWalk, checkTimeout(c.revalidateWalk), true) })
			}
			srv.Revalidate(rctx, c.revalidate, checkTimeout(c.revalidate), false)
			walks.Wait()
		}()
	} else {
		close(checked)
	}
	build := api.ReadBuild()
	log.Info("zvfserve started", "version", build.Version, "revision", build.RevisionLabel(), "modified", build.Modified, "go", build.GoVersion,
		"addr", ln.Addr().String(), "stores", len(stores))
	fmt.Fprintf(stdout, "zvfserve %s: serving %d store(s) on http://%s/\n", build.Version, len(stores), displayAddr(ln.Addr()))
	select {
	case err := <-errc:
		stopChecks()
		<-checked
		return err
	case <-ctx.Done():
	}
	storesOpen = false
	drainBeforeShutdown(srv, servers, c.shutdownDelay, log)
	return shutdown(srv, servers, c.shutdownGrace, cancelBase, stopChecks, checked, closeStores, log)
}

// serverErrorLog is an http.Server's ErrorLog: what net/http reports
// (accept errors, panics, TLS handshakes) as warnings of the server's
// logger, in its format.
func serverErrorLog(log *slog.Logger) *stdlog.Logger {
	return slog.NewLogLogger(log.Handler(), slog.LevelWarn)
}

// adminServer is the --admin-addr listener's server, bounded like the
// API's (api.AdminHTTPServer) and logging through log.
func adminServer(srv *api.Server, aln net.Listener, log *slog.Logger) (*http.Server, net.Listener) {
	admin, limited := srv.AdminHTTPServer(aln)
	admin.ErrorLog = serverErrorLog(log)
	return admin, limited
}

// listen opens the API's listener and, with --admin-addr, the admin one;
// an error names the flag whose address failed.
func listen(c *serveConfig) (ln, aln net.Listener, err error) {
	if ln, err = net.Listen("tcp", c.addr); err != nil {
		return nil, nil, listenError("--addr", c.addr, err)
	}
	if c.adminAddr != "" {
		if aln, err = net.Listen("tcp", c.adminAddr); err != nil {
			_ = ln.Close()
			return nil, nil, listenError("--admin-addr", c.adminAddr, err)
		}
	}
	return ln, aln, nil
}

// listenError says what to do about the mistakes an operator meets most
// (an address without a port, an address in use) instead of the socket
// call's chain ("listen tcp …: bind: address already in use"), which it
// keeps for the rest.
func listenError(flag, addr string, err error) error {
	if _, _, serr := net.SplitHostPort(addr); serr != nil {
		// A port alone (--addr 8080), or a host alone, as other servers
		// take them: a command-line mistake, said with the form wanted.
		if _, perr := strconv.Atoi(addr); perr == nil {
			return fmt.Errorf("%w: %s %s: want host:port, such as :%s (every interface) or 127.0.0.1:%s", cli.ErrUsage, flag, addr, addr, addr)
		}
		return fmt.Errorf("%w: %s %s: want host:port, such as %s", cli.ErrUsage, flag, addr, net.JoinHostPort(addr, "8080"))
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		other := "another port"
		if host, port, serr := net.SplitHostPort(addr); serr == nil {
			if p, perr := strconv.Atoi(port); perr == nil && p > 0 && p < 65535 {
				other = flag + " " + net.JoinHostPort(host, strconv.Itoa(p+1))
			}
		}
		return fmt.Errorf("%s %s: the address is in use (another zvfserve, or another program, listens there): stop it, or give another, such as %s", flag, addr, other)
	}
	return fmt.Errorf("%s %s: %w", flag, addr, err)
}

// drainBeforeShutdown keeps serving for delay with /readyz false: a load balancer that
// polls readiness (Kubernetes endpoints, HAProxy, Envoy) takes the replica
// out before its listener closes, instead of learning it from refused
// connections. Keep-alive is turned off, so each connection closes after
// its answer and its client reconnects elsewhere.
func drainBeforeShutdown(srv *api.Server, servers []*http.Server, delay time.Duration, log *slog.Logger) {
	srv.SetReady(false)
	if delay <= 0 {
		return
	}
	log.Info("draining: /readyz is false, still serving until the shutdown delay ends; a second SIGINT or SIGTERM ends serve at once", "delay", delay)
	for _, hs := range servers {
		hs.SetKeepAlivesEnabled(false)
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	<-t.C
}

// shutdown stops serving within grace, whatever storage does: /readyz
// turns false and the listeners close at once; requests in flight get the
// grace period to finish; then their connections are closed and their
// work cancelled, and shutdown returns even if some handler or store
// check is stuck in a read that ignores cancellation (the process exits
// with it). Closing the stores waits only within the grace period too.
func shutdown(srv *api.Server, servers []*http.Server, grace time.Duration, cancelBase, stopChecks func(), checked <-chan struct{},
	closeStores func(), log *slog.Logger) error {
	log.Info("shutting down: not ready, no new connections; requests in flight have the grace period; a second SIGINT or SIGTERM ends serve at once", "grace", grace)
	srv.SetReady(false)
	stopChecks()
	deadline := time.Now().Add(grace)
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	errs := make(chan error, len(servers))
	for _, hs := range servers {
		go func() { errs <- hs.Shutdown(sctx) }()
	}
	var err error
	for range servers {
		err = errors.Join(err, <-errs)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("grace period over with requests still running; closing their connections", "grace", grace)
		cancelBase()
		for _, hs := range servers {
			_ = hs.Close()
		}
		err = fmt.Errorf("shutdown: the %v grace period ran out with requests still running; their connections were closed", grace)
	}
	if !waitUntil(deadline, func() { <-checked }) {
		log.Warn("a store check is still running (stuck in storage); leaving it")
	}
	if !waitUntil(deadline, closeStores) {
		log.Warn("closing the stores is stuck in storage; leaving them")
	}
	return err
}

// waitUntil runs f and waits for it until deadline; it reports whether f
// finished.
func waitUntil(deadline time.Time, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// takesTokenFile is what --token-file takes, as its mistakes say it.
const takesTokenFile = "name a file that holds the bearer token (surrounding white space is ignored), or leave --token-file and ZVFSERVE_TOKEN_FILE unset"

// tokenFileError says in one sentence why --token-file's file could not
// be read and what the flag takes, instead of the OS error's chain
// ("open …: no such file or directory"); it is a setting to fix (exit 2).
func tokenFileError(file string, err error) error {
	why := "cannot be read"
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "no such file"
	case errors.Is(err, fs.ErrPermission):
		why = "not readable by this process (permission denied)"
	case errors.Is(err, syscall.EISDIR):
		why = "a folder, not a file"
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			why += " (" + pe.Err.Error() + ")"
		}
	}
	return fmt.Errorf("%w: --token-file %s: %s: %s", cli.ErrUsage, file, why, takesTokenFile)
}

// resolveToken settles where the bearer token comes from: --token,
// --token-file or ZVFSERVE_TOKEN (at most one of the flags). Each source
// set but empty is an error rather than a server without authentication
// (a template that lost its value must not open the data to everyone);
// the file and the variable are taken without surrounding white space (a
// Secret made from a file keeps its newline), and a token no header can
// carry is refused.
func resolveToken(fs *flag.FlagSet, c *serveConfig, log *slog.Logger) error {
	var onCommandLine, fileSet bool
	fs.Visit(func(f *flag.Flag) {
		onCommandLine = onCommandLine || f.Name == "token"
		fileSet = fileSet || f.Name == "token-file" // on the command line or by ZVFSERVE_TOKEN_FILE
	})
	if onCommandLine && c.tokenFile != "" {
		return fmt.Errorf("%w: --token and --token-file (or ZVFSERVE_TOKEN_FILE) both given; use one", cli.ErrUsage)
	}
	from := "--token"
	switch {
	case fileSet && c.tokenFile == "":
		return fmt.Errorf("%w: --token-file (or ZVFSERVE_TOKEN_FILE) is empty: name a file, or leave it unset to serve without a token", cli.ErrUsage)
	case c.tokenFile != "":
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return tokenFileError(c.tokenFile, err)
		}
		if c.token = strings.TrimSpace(string(b)); c.token == "" {
			return fmt.Errorf("%w: --token-file %s is empty: %s", cli.ErrUsage, c.tokenFile, takesTokenFile)
		}
		from = "--token-file " + c.tokenFile
	case onCommandLine:
		if c.token == "" {
			return fmt.Errorf("%w: --token is empty", cli.ErrUsage)
		}
		log.Warn("--token on the command line is visible to other local users in the process list; use ZVFSERVE_TOKEN or --token-file")
	default:
		v, set := os.LookupEnv("ZVFSERVE_TOKEN")
		if !set {
			return nil
		}
		if c.token = strings.TrimSpace(v); c.token == "" {
			return fmt.Errorf("%w: ZVFSERVE_TOKEN is empty: set a token, or unset it to serve without one", cli.ErrUsage)
		}
		from = "ZVFSERVE_TOKEN"
	}
	if strings.ContainsFunc(c.token, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		// Never said what it holds: the message would print the token.
		return fmt.Errorf("%w: the token of %s holds a control character (a tab, a line break), which no Authorization header can carry", cli.ErrUsage, from)
	}
	return nil
}

// memoryHeadroom is the soft memory limit above --cache-bytes (unless
// GOMEMLIMIT is set): what answers hold counts against the cache budget,
// so this is for the runtime, the stores' metadata and the collector's
// slack; 64 streaming JSON answers at once peak at about 330 MB in all
// (docs/performance.md).
const memoryHeadroom = 256 << 20

// connectionCap checks --max-connections against the descriptors this
// process may open (RLIMIT_NOFILE; Go raises the soft limit to the hard
// one at start), keeping room for the listeners, the store reads the
// concurrency limits allow (a file or an HTTP connection each), logs, and
// the connections the listeners hold past the cap (api.ConnectionsPastCap).
// An explicit --max-connections that does not fit is a usage error that
// says how many do; the default is lowered to fit, and said so; when
// none fits, the error names the flags that make room and the limit that
// would do.
func connectionCap(fs *flag.FlagSet, c *serveConfig, log *slog.Logger) (int, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	_, fromEnv := os.LookupEnv("ZVFSERVE_MAX_CONNECTIONS")
	return fitConnections(fs, c, log, lim.Cur, fromEnv)
}

// minFittedConnections: a default lowered below this is refused instead.
const minFittedConnections = 16

// minFittedSlots and minFittedReads: fitReads lowers the defaults of
// --max-concurrent and --read-concurrency no further.
const (
	minFittedSlots = 8
	minFittedReads = 8
)

// fitConnections is connectionCap under the open-file limit limit;
// fromEnv: --max-connections was given by its variable.
func fitConnections(fs *flag.FlagSet, c *serveConfig, log *slog.Logger, limit uint64, fromEnv bool) (int, error) {
	set := map[string]bool{} // given on the command line or by a variable (applyEnv sets those)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	explicit := fromEnv || set["max-connections"]
	reads := c.storeReads(fs)
	room := int(min(limit, math.MaxInt32)) - 64 - api.ConnectionsPastCap
	fitted := room-c.maxConcurrent*reads < minFittedConnections && fitReads(c, set, room, &reads)
	reserve := 64 + c.maxConcurrent*reads
	fits := room - c.maxConcurrent*reads
	kept := fmt.Sprintf("the open-file limit %d (RLIMIT_NOFILE) beside %d descriptors kept for store reads (--max-concurrent %d × %d chunk reads) and the rest, and %d for connections past the cap (probe slots, probes being recognised, the admin listener)",
		limit, reserve, c.maxConcurrent, reads, api.ConnectionsPastCap)
	switch {
	case c.maxConnections < 1:
		return 0, fmt.Errorf("%w: --max-connections %d: must be at least 1", cli.ErrUsage, c.maxConnections)
	case c.maxConnections <= fits && !fitted:
		return c.maxConnections, nil
	case fits < minFittedConnections:
		// Lowering --max-connections cannot help: the reads' reserve
		// takes the limit.
		return 0, fmt.Errorf("%w: no --max-connections fits %s; lower --max-concurrent or --read-concurrency, or raise the limit (ulimit -n) to %d, which fits --max-connections %d",
			cli.ErrUsage, kept, reserve+api.ConnectionsPastCap+c.maxConnections, c.maxConnections)
	case c.maxConnections > fits && explicit:
		return 0, fmt.Errorf("%w: --max-connections %d does not fit %s: at most %d fit; lower it, or raise the limit (ulimit -n)",
			cli.ErrUsage, c.maxConnections, kept, fits)
	}
	fits = min(fits, c.maxConnections)
	if fitted {
		log.Info("the open-file limit (RLIMIT_NOFILE) does not fit the default request and read concurrency: lowered to fit; set --max-concurrent, --read-concurrency and --max-connections, or raise the limit (ulimit -n)",
			"max_concurrent", c.maxConcurrent, "read_concurrency", reads, "max_connections", fits, "open_file_limit", limit,
			"kept_for_reads", reserve, "kept_past_cap", api.ConnectionsPastCap)
		return fits, nil
	}
	log.Info("--max-connections lowered to fit the open-file limit (RLIMIT_NOFILE)", "max_connections", fits, "open_file_limit", limit, "kept_for_reads", reserve,
		"kept_past_cap", api.ConnectionsPastCap)
	return fits, nil
}

// fitReads lowers the defaults of --max-concurrent, then of
// --read-concurrency (those set flags leave alone), so that the
// descriptors kept for store reads take at most half of room, the
// descriptors the limit leaves for reads and connections: a new user's
// object store under a stock limit of 1,024 (64 × 32 reads kept) starts
// rather than being refused. It reports whether it lowered either;
// *reads is the most chunk reads a query of any store now makes.
func fitReads(c *serveConfig, set map[string]bool, room int, reads *int) bool {
	half := room / 2
	mc, rd := c.maxConcurrent, *reads
	if !set["max-concurrent"] {
		mc = max(minFittedSlots, min(mc, half/rd))
	}
	if mc*rd > half && !set["read-concurrency"] {
		rd = max(minFittedReads, min(rd, half/mc))
	}
	if mc == c.maxConcurrent && rd == *reads {
		return false
	}
	c.maxConcurrent = mc
	if rd < *reads {
		c.readCap = rd
	}
	*reads = rd
	return true
}

// storeReads is the most chunk reads a query of any of the stores
// serve was given makes.
func (c *serveConfig) storeReads(fs *flag.FlagSet) int {
	reads := 8
	for _, a := range fs.Args() {
		_, target := storeArg(a)
		reads = max(reads, c.reads(target))
	}
	return reads
}

// reads is the chunk reads a query of the store at target makes: the
// flag's value or its default, under readCap.
func (c *serveConfig) reads(target string) int {
	n := readConcurrency(c.readConcurrency, target)
	if c.readCap > 0 {
		n = min(n, c.readCap)
	}
	return n
}

// readConcurrency is the flag's value, or by default 8 parallel chunk
// reads for local folders and memory and 32 for object stores.
func readConcurrency(flagValue int, target string) int {
	if flagValue > 0 {
		return flagValue
	}
	if !strings.Contains(target, "://") || strings.HasPrefix(target, "file://") || strings.HasPrefix(target, "mem://") {
		return 8
	}
	return 32
}

// checkTimeout is the deadline of one store's check run every interval:
// the interval, and never less than two minutes, since a check that finds
// a change opens the new version (a listing of every level; of every
// object while a change settles) within it.
func checkTimeout(every time.Duration) time.Duration { return max(every, 2*time.Minute) }

func displayAddr(a net.Addr) string {
	s := a.String()
	if strings.HasPrefix(s, "[::]:") {
		return "localhost:" + strings.TrimPrefix(s, "[::]:")
	}
	if strings.HasPrefix(s, "0.0.0.0:") {
		return "localhost:" + strings.TrimPrefix(s, "0.0.0.0:")
	}
	return s
}
