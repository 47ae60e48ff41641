package writer

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// nodeStyle is how a group's zarr.json is rendered: the reference's batched
// fast path writes one compact line, zarr-python's encoder path pretty JSON.
type nodeStyle int

const (
	styleCompact nodeStyle = iota
	stylePretty
)

// blobCodec is the codec chain of the per-chunk uint8 blob arrays.
type blobCodec struct {
	codecs  []any // the zarr.json "codecs" list
	compact bool  // zarr.json rendered by the batched fast path
	// skipZero mirrors zarr's write_empty_chunks=False: an all-zero blob
	// written through zarr's encoder has no c/0 object.
	skipZero bool
	encode   func(src []byte) ([]byte, error) // nil = identity
}

// storeWriter writes one ZVF store under prefix: blobs are encoded and put
// by a bounded pool of goroutines, group nodes are collected and written
// last (root last of all, so a reader never sees a root without data).
type storeWriter struct {
	w      storage.Writer
	prefix string
	d      int
	user   *blobCodec // codec chosen by the caller (batched writes)
	zstd   *blobCodec // non-batched writes (pyramids, point object attributes)

	g   *errgroup.Group
	ctx context.Context

	mu     sync.Mutex
	groups map[string]*groupNode

	scratch sync.Pool // raw-blob buffers reused when a codec copies them
	closers []func() error
	// after runs once every scheduled task has finished (the pool's
	// context is cancelled by then, so these get the caller's).
	after []func(ctx context.Context) error
}

type groupNode struct {
	attrs obj
	style nodeStyle
}

func newStoreWriter(ctx context.Context, w storage.Writer, prefix string, d int, o *Options) (*storeWriter, error) {
	// Keys are relative and never start with "/" (zvf/storage).
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	s := &storeWriter{w: w, prefix: prefix, d: d, groups: map[string]*groupNode{}}
	s.g, s.ctx = errgroup.WithContext(ctx)
	s.g.SetLimit(o.concurrency())
	// Single-segment frames always carry the content size; without it
	// klauspost omits the size for inputs under 256 bytes and
	// numcodecs-based readers (the reference) refuse the frame.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithSingleSegment(true),
		zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(o.concurrency()))
	if err != nil {
		return nil, fmt.Errorf("zvf writer: zstd encoder: %w", err)
	}
	s.closers = append(s.closers, enc.Close)
	zstdCodec := &blobCodec{
		codecs: []any{obj{{"name", "bytes"}},
			obj{{"name", "zstd"}, {"configuration", obj{{"level", 0}, {"checksum", false}}}}},
		skipZero: true,
		encode:   func(src []byte) ([]byte, error) { return enc.EncodeAll(src, nil), nil },
	}
	s.zstd = zstdCodec
	switch o.Codec {
	case CodecNone:
		s.user = &blobCodec{codecs: []any{obj{{"name", "bytes"}}}, compact: true}
	case CodecZstd:
		s.user = zstdCodec
	case CodecBlosc:
		if s.user, err = bloscCodec(); err != nil {
			return nil, errors.Join(inputErr("Options.Codec", -1, "%v", err), s.close())
		}
	default:
		return nil, errors.Join(inputErr("Options.Codec", -1, "unknown codec %d", o.Codec), s.close())
	}
	return s, nil
}

// close releases the codec encoders.
func (s *storeWriter) close() error {
	var errs []error
	for _, c := range s.closers {
		if err := c(); err != nil {
			errs = append(errs, fmt.Errorf("zvf writer: close encoder: %w", err))
		}
	}
	return errors.Join(errs...)
}

// run schedules fn on the bounded pool; it blocks while the pool is full,
// which bounds how many chunks are in memory at once.
func (s *storeWriter) run(fn func(ctx context.Context) error) {
	s.g.Go(func() error {
		// After a failure the pool's context is cancelled: skip the
		// encoding work of tasks that can no longer succeed.
		if err := s.ctx.Err(); err != nil {
			return err
		}
		return fn(s.ctx)
	})
}

// wait waits for every scheduled task and returns the first error.
func (s *storeWriter) wait() error { return s.g.Wait() }

func (s *storeWriter) put(ctx context.Context, key string, data []byte) error {
	full := s.prefix + key
	if err := s.w.Put(ctx, full, data); err != nil {
		return &WriteError{Key: full, Err: err}
	}
	return nil
}

// getScratch returns a reusable buffer of length n for raw blob bytes that
// a compressing codec will copy.
func (s *storeWriter) getScratch(n int) []byte {
	if b, ok := s.scratch.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]byte, n)
}

func (s *storeWriter) putScratch(b []byte) {
	s.scratch.Put(&b)
}

// blob writes one per-chunk blob array <array>/<name>/ (zarr.json + c/0).
// data must not be modified afterwards when the codec is the identity.
func (s *storeWriter) blob(ctx context.Context, c *blobCodec, array, name string, data []byte) error {
	base := array + "/" + name + "/"
	n := len(data)
	var meta string
	codecsJSON := normalise(c.codecs)
	if c.compact {
		size := strconv.Itoa(n)
		chunk := size
		if n == 0 {
			size, chunk = "0", "1" // zarr refuses a zero chunk length
		}
		meta = `{"shape":[` + size + `],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[` + chunk +
			`]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,"codecs":` +
			compactDumps(codecsJSON) + `,"attributes":{},"zarr_format":3,"node_type":"array","storage_transformers":[]}`
	} else {
		chunk := int64(n)
		if n == 0 {
			chunk = 1
		}
		meta = prettyDumps(obj{
			{"shape", []int64{int64(n)}},
			{"data_type", "uint8"},
			{"chunk_grid", obj{{"name", "regular"}, {"configuration", obj{{"chunk_shape", []int64{chunk}}}}}},
			{"chunk_key_encoding", obj{{"name", "default"}, {"configuration", obj{{"separator", "/"}}}}},
			{"fill_value", 0},
			{"codecs", codecsJSON},
			{"attributes", obj{}},
			{"zarr_format", 3},
			{"node_type", "array"},
			{"storage_transformers", []any{}},
		})
	}
	if err := s.put(ctx, base+"zarr.json", []byte(meta)); err != nil {
		return err
	}
	if n == 0 || (c.skipZero && allZero(data)) {
		return nil
	}
	payload := data
	if c.encode != nil {
		var err error
		if payload, err = c.encode(data); err != nil {
			return &WriteError{Key: s.prefix + base + "c/0", Err: err}
		}
	}
	return s.put(ctx, base+"c/0", payload)
}

// rawBlob builds a blob of n bytes with fill and writes it. With a
// compressing codec the raw bytes live in a pooled scratch buffer.
func (s *storeWriter) rawBlob(ctx context.Context, c *blobCodec, array, name string, n int, fill func(b []byte)) error {
	if c.encode == nil {
		b := make([]byte, n)
		fill(b)
		return s.blob(ctx, c, array, name, b)
	}
	b := s.getScratch(n)
	fill(b)
	err := s.blob(ctx, c, array, name, b)
	s.putScratch(b)
	return err
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// group records (or updates, keeping key order) a group node's attributes.
// Pretty groups come from zarr's encoder path, whose require_group also
// creates every missing ancestor as an empty group; compact groups come
// from the batched fast path, which leaves ancestors implicit.
func (s *storeWriter) group(node string, style nodeStyle, attrs obj) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if style == stylePretty {
		for p := path.Dir(node); p != "." && p != "/"; p = path.Dir(p) {
			if _, ok := s.groups[p]; !ok {
				s.groups[p] = &groupNode{style: stylePretty, attrs: obj{}}
			}
		}
	}
	g, ok := s.groups[node]
	if !ok {
		g = &groupNode{style: style, attrs: obj{}}
		s.groups[node] = g
	}
	if style == stylePretty {
		g.style = stylePretty
	}
	for _, e := range attrs {
		g.attrs = g.attrs.set(e.k, e.v)
	}
}

// flushGroups writes every collected group node, root zarr.json last.
func (s *storeWriter) flushGroups(ctx context.Context) error {
	paths := make([]string, 0, len(s.groups))
	for p := range s.groups {
		if p != "" {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	if _, ok := s.groups[""]; ok {
		paths = append(paths, "")
	}
	for _, p := range paths {
		g := s.groups[p]
		attrs := g.attrs
		if attrs == nil {
			attrs = obj{}
		}
		var body string
		if g.style == styleCompact {
			body = `{"zarr_format":3,"node_type":"group","attributes":` + pyDumps(attrs) + `}`
		} else {
			body = prettyDumps(obj{{"attributes", attrs}, {"zarr_format", 3}, {"node_type", "group"}})
		}
		key := "zarr.json"
		if p != "" {
			key = p + "/zarr.json"
		}
		if err := s.put(ctx, key, []byte(body)); err != nil {
			return err
		}
	}
	return nil
}
