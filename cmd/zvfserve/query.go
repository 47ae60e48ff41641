package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

func queryCommand() command {
	return command{summary: "print a bbox or object answer as the HTTP API returns it", run: runQuery}
}

// openOne opens a single store for the command-line tools.
func openOne(ctx context.Context, target string) (*zvf.Store, error) {
	name, t := storeArg(target)
	if !api.ValidStoreName(name) {
		name = "store"
	}
	st, err := blobstore.Open(ctx, t)
	if err != nil {
		return nil, err
	}
	s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(256 << 20)})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return s, nil
}

func runQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	level := fs.String("level", "0", "level number, or auto (bbox only)")
	bbox := fs.String("bbox", "", "x0,y0,z0,x1,y1,z1: the minimum corner, then the maximum (2·D numbers)")
	object := fs.Int64("object", -1, "object id")
	attrs := fs.String("attributes", "", "comma-separated vertex attributes, or *")
	format := fs.String("f", "json", "output format: json, ndjson or bin")
	limit := fs.Int64("limit", 0, "page size (bbox); 0: the whole answer")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: zvfserve query STORE --level L (--bbox x0,y0,z0,x1,y1,z1 | --object ID) [--attributes a,b] [--f json|ndjson|bin]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(reorder(args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 || (*bbox == "") == (*object < 0) {
		fs.Usage()
		return fmt.Errorf("%w: need one STORE and exactly one of --bbox or --object", errUsage)
	}
	s, err := openOne(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	defer s.Close()
	q := url.Values{}
	q.Set("level", *level)
	q.Set("f", *format)
	if *attrs != "" {
		q.Set("attributes", *attrs)
	}
	var path string
	if *bbox != "" {
		parts := strings.Split(*bbox, ",")
		d := s.Info().Dims
		if len(parts) != 2*d {
			return fmt.Errorf("%w: --bbox needs %d numbers for a %d-D store", errUsage, 2*d, d)
		}
		q.Set("min", strings.Join(parts[:d], ","))
		q.Set("max", strings.Join(parts[d:], ","))
		path = "/api/v1/stores/" + s.Name() + "/bbox"
	} else {
		path = fmt.Sprintf("/api/v1/stores/%s/objects/%d", s.Name(), *object)
	}
	// The answer comes from the server's own handler, so it is byte for
	// byte what GET would return.
	max := int64(1 << 40)
	if *limit > 0 {
		q.Set("limit", fmt.Sprint(*limit))
	}
	srv, err := api.New(api.Options{Stores: []*zvf.Store{s}, MaxVertices: max, RequestTimeout: 1 << 40})
	if err != nil {
		return err
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path+"?"+q.Encode(), nil)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return fmt.Errorf("%s", strings.TrimSpace(rec.Body.String()))
	}
	_, err = stdout.Write(rec.Body.Bytes())
	return err
}

// reorder moves flags before positional arguments so "query STORE --level 1"
// parses like "query --level 1 STORE".
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}
