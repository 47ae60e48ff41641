package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
)

func queryCommand() cli.Command {
	return cli.Command{Summary: "print a bbox or object answer as the HTTP API returns it (paged with --cursor, or every page with --all)", Run: runQuery}
}

// openOneFor is openOne for the command cmd: pointed at a folder of
// stores, it says so and lists them (a usage error) rather than what is
// missing from the folder as a store.
func openOneFor(ctx context.Context, target, cmd string, log *slog.Logger) (*zvf.Store, func() error, error) {
	s, closeStore, err := openOne(ctx, target, log)
	if err == nil {
		return s, closeStore, nil
	}
	_, t := storeArg(target)
	if st, oerr := openStore(ctx, t, localfs.Options{Logger: log}); oerr == nil {
		ferr := folderOfStores(ctx, st, target, cmd)
		_ = st.Close()
		if ferr != nil {
			return nil, nil, ferr
		}
	}
	return nil, nil, err
}

// openOne opens one STORE argument for the command-line tools, what its
// storage's SDK logs going to log; close releases its storage.
func openOne(ctx context.Context, target string, log *slog.Logger) (s *zvf.Store, close func() error, err error) {
	name, t := storeArg(target)
	if !api.ValidStoreName(name) {
		name = "store"
	}
	st, err := openStore(ctx, t, localfs.Options{Logger: log})
	if err != nil {
		return nil, nil, err
	}
	s, err = zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(256 << 20)})
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return s, st.Close, nil
}

const queryUsage = `Usage: zvfserve query STORE --bbox x0,y0,z0,x1,y1,z1 [--level L|auto] [--attributes a,b|*] [--edge-attributes w|*] [--limit N] [--cursor C | --all] [--f json|ndjson|bin]
       zvfserve query STORE --object ID [--level L] [--attributes a,b|*] [--edge-attributes w|*] [--f json|ndjson|bin]

Prints exactly the body that GET /api/v1/stores/{store}/bbox (or /objects/{id}) returns, streamed as
it is computed. A bbox answer larger than --limit is paged: its "next" is the cursor of the next page
(stderr says so); pass it back with --cursor, or give --all for every page. With --all, JSON is one
document equal to the unpaged answer (its edges and faces in another order: each page carries those
whose last vertex it holds); NDJSON and binary stream the pages one after another, edge and face
indices counting the rows of all pages. Memory stays bounded by --limit, except that JSON holds the
object ids, attribute values and connectivity until its end, as the unpaged answer does. Errors are
one sentence on stderr, its last line (a call missing an argument, or naming an unknown flag, prints
this usage before it): exit 2 for a mistake on the command line, 1 otherwise.
`

func runQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("query", queryUsage, stderr)
	level := fs.String("level", "0", "level number, or auto (bbox only: the finest level whose count fits --limit)")
	bbox := fs.String("bbox", "", "x0,y0,z0,x1,y1,z1: the minimum corner, then the maximum (2·D numbers; negative ones too: --bbox -5,0,0,5,5,5)")
	object := fs.Int64("object", 0, "object id (0 or more): print that object, as GET /api/v1/stores/{store}/objects/{id} returns it, instead of a box")
	attrs := fs.String("attributes", "", "comma-separated vertex attributes, or *")
	edgeAttrs := fs.String("edge-attributes", "", "comma-separated link (per-edge) attributes of a graph, or *: their values for each edge (edge_attributes=)")
	format := fs.String("f", "json", "output format: json, ndjson or bin")
	limit := fs.Int64("limit", 0, "vertices per page (bbox); 0: the whole answer in one page")
	cursor := fs.String("cursor", "", "continue a paged bbox answer from the \"next\" cursor of the previous page (same other flags)")
	all := fs.Bool("all", false, "print every page of a paged bbox answer: in JSON one document, the unpaged answer; in NDJSON and binary the pages one after another")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err // flag.ErrHelp, after the usage, exits 0
	}
	hasObject := false
	fs.Visit(func(f *flag.Flag) { hasObject = hasObject || f.Name == "object" })
	if fs.NArg() != 1 || (*bbox == "") != hasObject {
		return cli.Misuse(fs, "need one STORE and exactly one of --bbox or --object")
	}
	if *object < 0 {
		return fmt.Errorf("%w: --object %d: an object id is 0 or more", cli.ErrUsage, *object)
	}
	if *bbox == "" && (*cursor != "" || *all) {
		return fmt.Errorf("%w: --cursor and --all page bbox answers; an object comes whole", cli.ErrUsage)
	}
	// The server's file formats (f=csv, swc, …) page differently; query
	// prints the vertex payloads, whose pages --all can join.
	if *format != "json" && *format != "ndjson" && *format != "bin" {
		return fmt.Errorf("%w: --f %q: use json, ndjson or bin", cli.ErrUsage, *format)
	}
	s, closeStore, err := openOneFor(ctx, fs.Arg(0), "query", toolLogger(stderr))
	if err != nil {
		return err
	}
	defer closeStore()
	q := url.Values{}
	q.Set("level", *level)
	q.Set("f", *format)
	if *attrs != "" {
		q.Set("attributes", *attrs)
	}
	if *edgeAttrs != "" {
		q.Set("edge_attributes", *edgeAttrs)
	}
	if *limit > 0 {
		q.Set("limit", strconv.FormatInt(*limit, 10))
	}
	// No per-response cap beyond --limit. (The answer is written without
	// the HTTP middleware, so no request deadline either.)
	srv, err := api.New(api.Options{Stores: []*zvf.Store{s}, MaxVertices: 1 << 40})
	if err != nil {
		return err
	}
	out := &tailWriter{w: stdout}
	if *bbox == "" {
		return queryError(srv.WriteObject(ctx, out, s.Name(), *object, q), out.n)
	}
	min, max, err := parseBox(*bbox, s.Info().Dims, s.Info().Axes)
	if err != nil {
		return err
	}
	q.Set("min", min)
	q.Set("max", max)
	if *cursor != "" {
		q.Set("cursor", *cursor)
	}
	if *all && *format == "json" {
		// One document, not a document a page.
		j := &jsonJoin{w: out}
		for {
			if err := srv.WriteBBox(ctx, j, s.Name(), q); err != nil {
				return queryError(err, out.n)
			}
			next, err := j.endPage()
			if err != nil || next == "" {
				return queryError(err, out.n)
			}
			q.Set("cursor", next)
		}
	}
	for {
		if err := srv.WriteBBox(ctx, out, s.Name(), q); err != nil {
			return queryError(err, out.n)
		}
		next := out.next()
		if next == "" {
			return nil
		}
		if !*all {
			fmt.Fprintf(stderr, "zvfserve query: more rows follow; continue with --cursor %s (or give --all)\n", next)
			return nil
		}
		q.Set("cursor", next)
	}
}

// parseBox checks --bbox and splits it into the API's min and max.
func parseBox(v string, dims int, axes []zvf.Axis) (min, max string, err error) {
	parts := strings.Split(v, ",")
	if len(parts) != 2*dims {
		return "", "", fmt.Errorf("%w: --bbox needs %d numbers for a %d-D store (the minimum corner, then the maximum), got %d", cli.ErrUsage, 2*dims, dims, len(parts))
	}
	nums := make([]float64, len(parts))
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || !api.IsDecimal(strings.TrimSpace(p)) {
			return "", "", fmt.Errorf("%w: --bbox: %q is not a number: write decimal numbers (12, -0.5, 1.5e3)", cli.ErrUsage, p)
		}
		nums[i] = f
	}
	for i := 0; i < dims; i++ {
		if nums[i] > nums[dims+i] {
			a := fmt.Sprintf("axis %d ", i)
			if i < len(axes) && axes[i].Name != "" {
				a = axes[i].Name
			}
			return "", "", fmt.Errorf("%w: --bbox takes the minimum corner first, but %s0 = %g is greater than %s1 = %g", cli.ErrUsage, a, nums[i], a, nums[dims+i])
		}
	}
	return strings.Join(parts[:dims], ","), strings.Join(parts[dims:], ","), nil
}

// queryError turns an answer's error into one sentence: the problem's
// detail as an HTTP client would read it; a bad parameter is a usage
// error. written says whether part of the answer is already out.
func queryError(err error, written int64) error {
	if err == nil {
		return nil
	}
	var p *api.Problem
	if errors.As(err, &p) {
		msg := p.Detail
		if msg == "" {
			msg = strings.ToLower(p.Title)
		}
		if p.Status == http.StatusBadRequest {
			return fmt.Errorf("%w: %s", cli.ErrUsage, msg)
		}
		err = errors.New(msg)
	}
	if written > 0 {
		return fmt.Errorf("the answer is cut off after %d bytes: %w", written, err)
	}
	return err
}

// tailWriter passes an answer through and keeps its last bytes, where the
// trailer's "next" cursor is: in all three formats it is the last "next"
// member of the answer, followed at most by the offset and padding.
type tailWriter struct {
	w    io.Writer
	n    int64
	tail []byte
}

// tailSize holds a trailer's end: a cursor is at most 512 bytes.
const tailSize = 2048

func (t *tailWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.n += int64(n)
	p = p[:n]
	if len(p) >= tailSize {
		t.tail = append(t.tail[:0], p[len(p)-tailSize:]...)
	} else {
		if over := len(t.tail) + len(p) - tailSize; over > 0 {
			t.tail = append(t.tail[:0], t.tail[over:]...)
		}
		t.tail = append(t.tail, p...)
	}
	return n, err
}

// next returns the cursor of the answer written since the last call ("" on
// the last page) and starts on the next answer.
func (t *tailWriter) next() string {
	tail := t.tail
	t.tail = t.tail[:0]
	// The last one: an attribute named "next" can only come before it.
	i := bytes.LastIndex(tail, []byte(`"next":`))
	if i < 0 {
		return ""
	}
	rest := tail[i+len(`"next":`):]
	if len(rest) == 0 || rest[0] != '"' {
		return "" // null: the last page
	}
	rest = rest[1:]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return ""
	}
	return string(rest[:end])
}
