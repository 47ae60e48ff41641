package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// The benchmark stores and the in-process server over them.

// benchStores returns the points and streamlines stores: built in memory,
// or under dir (written once, then reused).
func benchStores(ctx context.Context, dir string, points, streamlines int) (map[string]storage.Store, error) {
	build := map[string]func() (storage.Writer, error){
		"points":      func() (storage.Writer, error) { return synth.Points(ctx, points, 1, writer.CodecNone) },
		"streamlines": func() (storage.Writer, error) { return synth.Streamlines(ctx, streamlines, 1) },
	}
	out := map[string]storage.Store{}
	closeAll := func() { closeStores(out) }
	for _, name := range []string{"points", "streamlines"} {
		if name == "streamlines" && streamlines == 0 {
			continue
		}
		if dir == "" {
			mem, err := build[name]()
			if err != nil {
				closeAll()
				return nil, err
			}
			out[name] = storage.Sub(mem, name)
			continue
		}
		if err := synth.OnDisk(ctx, dir, name, build[name]); err != nil {
			closeAll()
			return nil, err
		}
		disk, err := blobstore.Open(ctx, filepath.Join(dir, name))
		if err != nil {
			closeAll()
			return nil, err
		}
		out[name] = disk
	}
	return out, nil
}

// closeStores closes the stores benchStores opened.
func closeStores(stores map[string]storage.Store) {
	for _, st := range stores {
		_ = st.Close()
	}
}

// benchServe starts the API on a loopback port.
func benchServe(ctx context.Context, stores map[string]storage.Store, ch *cache.Cache) (string, func(), error) {
	return benchServeVia(ctx, stores, ch, nil)
}

// benchServeVia is benchServe behind an emulated network link (nil: none).
func benchServeVia(ctx context.Context, stores map[string]storage.Store, ch *cache.Cache, via *link) (string, func(), error) {
	var open []*zvf.Store
	for name, st := range stores {
		s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: ch})
		if err != nil {
			return "", nil, err
		}
		open = append(open, s)
	}
	srv, err := api.New(api.Options{Stores: open, Cache: ch, MaxVertices: 2_000_000, MaxConcurrent: 256})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs, limited := srv.HTTPServer(ln)
	hs.Handler = via.wrap(hs.Handler)
	go func() { _ = hs.Serve(limited) }()
	return "http://" + ln.Addr().String(), func() { _ = hs.Close() }, nil
}

// serveObjects serves st's objects by key, as a static file server or an
// object store's website endpoint would: a folder on disk through
// http.FileServer (sendfile), any other store through a handler that
// reads the object whole and writes it.
func serveObjects(st storage.Store, dir string, via *link) (string, func(), error) {
	var h http.Handler
	if dir != "" {
		h = http.FileServer(http.Dir(dir))
	} else {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := storage.ReadAll(r.Context(), st, strings.TrimPrefix(r.URL.Path, "/"), 1<<30)
			if errors.Is(err, storage.ErrNotFound) {
				http.NotFound(w, r)
				return
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_, _ = w.Write(b)
		})
	}
	return serveLocal(via.wrap(h))
}

// serveLocal serves h on a free loopback port: its base URL and a stop.
func serveLocal(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = hs.Close() }, nil
}
