// Package memstore implements storage.Writer in memory: the store behind
// mem:// URLs (blobstore.Open hands them here), the built-in demo and
// tests. Keys are kept in a sorted index, so a listing costs the size of
// its answer (a binary search per folder), not the size of the store as
// gocloud's in-memory bucket did (it copied and sorted every key of the
// bucket on each List call).
//
// Every Put stamps the object with a new version and a modification time
// from a clock that never repeats nor goes back, and Now reads the same
// clock: an object written after Now is stamped after it, one written
// before is stamped before, so storage.Since separates store versions
// exactly.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Store is an in-memory storage.Writer, safe for concurrent use.
type Store struct {
	clock func() time.Time

	mu      sync.Mutex
	objs    map[string]*object
	sorted  []string // keys, sorted
	pending []string // keys added since sorted was last merged, unsorted
	last    time.Time
	seq     uint64
	closed  bool
}

type object struct {
	data  []byte
	attrs storage.Attrs
}

// New returns an empty store stamped by the system clock.
func New() *Store { return NewWithClock(time.Now) }

// NewWithClock returns an empty store whose stamps come from clock (which
// need not be monotonic: the store never lets its stamps go back).
func NewWithClock(clock func() time.Time) *Store {
	return &Store{clock: clock, objs: map[string]*object{}}
}

var errClosed = fmt.Errorf("%w: store closed", storage.ErrUnavailable)

// tick returns the next stamp, after every stamp given before. Callers
// hold mu.
func (s *Store) tick() time.Time {
	t := s.clock()
	if !t.After(s.last) {
		t = s.last.Add(time.Nanosecond)
	}
	s.last = t
	return t
}

// Now implements storage.Store: a stamp after every object written
// before the call and before every object written after it.
func (s *Store) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tick()
}

// check validates a call's context and key.
func check(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return &storage.Error{Op: op, Key: key, Err: err}
	}
	if err := validKey(key); err != nil {
		return &storage.Error{Op: op, Key: key, Err: err}
	}
	return nil
}

// validKey accepts what a local folder or an object store can hold
// without escaping the root: relative, slash-separated, no "." or ".."
// segment, no empty segment, no NUL; or such a key and a "/", a folder
// marker (see marker).
func validKey(key string) error {
	k := strings.TrimSuffix(key, "/")
	if k == "" || strings.ContainsRune(k, 0) || strings.Contains(k, "\\") {
		return fmt.Errorf("invalid key %q", key)
	}
	for seg := range strings.SplitSeq(k, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("invalid key %q", key)
		}
	}
	return nil
}

// marker reports whether key is a "folder/" marker: the empty object that
// object stores' consoles and sync tools create so that a folder shows.
// Stored as they do it, it makes its folder show in its parent's listing,
// and is otherwise no object (blobstore treats them alike).
func marker(key string) bool { return strings.HasSuffix(key, "/") }

// checkPrefix validates a listing's prefix: "" or a key ending in "/".
func checkPrefix(ctx context.Context, op, prefix string) error {
	if err := ctx.Err(); err != nil {
		return &storage.Error{Op: op, Key: prefix, Err: err}
	}
	if prefix == "" {
		return nil
	}
	if !strings.HasSuffix(prefix, "/") || validKey(prefix) != nil {
		return &storage.Error{Op: op, Key: prefix, Err: fmt.Errorf("invalid prefix %q", prefix)}
	}
	return nil
}

// Start implements storage.Starter: a read of memory never blocks, so it
// is done at once, on the caller's goroutine.
func (s *Store) Start(ctx context.Context, key string, o storage.ReadOptions) func() (storage.Object, error) {
	obj, err := s.Get(ctx, key, o)
	return func() (storage.Object, error) { return obj, err }
}

// StartAll implements storage.BatchStarter: each read is done at once.
func (s *Store) StartAll(ctx context.Context, rs []storage.Read) []func() (storage.Object, error) {
	waits := make([]func() (storage.Object, error), len(rs))
	for i, r := range rs {
		waits[i] = s.Start(ctx, r.Key, r.Opt)
	}
	return waits
}

// Get implements storage.Store. The bytes are a copy: callers may keep
// or change them.
func (s *Store) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	if err := check(ctx, "get", key); err != nil {
		return storage.Object{}, err
	}
	if err := storage.CheckBound(o); err != nil {
		return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: err}
	}
	s.mu.Lock()
	obj, err := s.lookup(key)
	s.mu.Unlock()
	if err != nil {
		return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: err}
	}
	if o.IfMatch != "" && o.IfMatch != obj.attrs.ETag {
		return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: &storage.ChangedError{Modified: obj.attrs.Modified}}
	}
	n, err := storage.Want(o, obj.attrs.Size)
	if err != nil {
		return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: err}
	}
	off := min(o.Off, obj.attrs.Size)
	// obj.data is never written after Put stored it, so it is read
	// outside the lock.
	return storage.Object{Data: slices.Clone(obj.data[off : off+n : off+n]), Attrs: obj.attrs}, nil
}

// lookup finds key. Callers hold mu.
func (s *Store) lookup(key string) (*object, error) {
	if s.closed {
		return nil, errClosed
	}
	obj, ok := s.objs[key]
	if !ok {
		return nil, storage.ErrNotFound
	}
	return obj, nil
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	if err := check(ctx, "stat", key); err != nil {
		return storage.Attrs{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, err := s.lookup(key)
	if err != nil {
		return storage.Attrs{}, &storage.Error{Op: "stat", Key: key, Err: err}
	}
	return obj.attrs, nil
}

// index returns the sorted keys, first merging the keys added since the
// last call (a batch of Puts costs one sort, not a shift of the index per
// key). Callers hold mu; the slice is valid until they release it.
func (s *Store) index() []string {
	if len(s.pending) > 0 {
		slices.Sort(s.pending)
		// Merge from the back, in place: O(len(sorted)+len(pending)).
		n, m := len(s.sorted), len(s.pending)
		s.sorted = slices.Grow(s.sorted, m)[:n+m]
		i, j := n-1, m-1
		for k := n + m - 1; j >= 0; k-- {
			if i >= 0 && s.sorted[i] > s.pending[j] {
				s.sorted[k] = s.sorted[i]
				i--
			} else {
				s.sorted[k] = s.pending[j]
				j--
			}
		}
		s.pending = s.pending[:0]
	}
	return s.sorted
}

// under returns the range of keys that start with prefix.
func under(keys []string, prefix string) []string {
	lo := sort.SearchStrings(keys, prefix)
	hi := lo + sort.Search(len(keys)-lo, func(i int) bool { return !strings.HasPrefix(keys[lo+i], prefix) })
	return keys[lo:hi]
}

// children calls fn for each direct child of prefix in keys (sorted, all
// under prefix): an object's key, or a folder's prefix (ending in "/")
// once, skipping the rest of the folder by binary search. The marker of
// prefix itself is no child.
func children(keys []string, prefix string, fn func(key string, folder bool)) {
	if len(keys) > 0 && keys[0] == prefix {
		keys = keys[1:]
	}
	for len(keys) > 0 {
		k := keys[0]
		i := strings.IndexByte(k[len(prefix):], '/')
		if i < 0 {
			fn(k, false)
			keys = keys[1:]
			continue
		}
		dir := k[:len(prefix)+i+1]
		fn(dir, true)
		// Every key in dir sorts before dir with its "/" raised to "0".
		end := dir[:len(dir)-1] + "0"
		keys = keys[sort.SearchStrings(keys, end):]
	}
}

// List implements storage.Store.
func (s *Store) List(ctx context.Context, prefix string) (storage.Listing, error) {
	if err := checkPrefix(ctx, "list", prefix); err != nil {
		return storage.Listing{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.Listing{}, &storage.Error{Op: "list", Key: prefix, Err: errClosed}
	}
	var l storage.Listing
	children(under(s.index(), prefix), prefix, func(k string, folder bool) {
		if folder {
			l.Prefixes = append(l.Prefixes, k)
		} else {
			l.Keys = append(l.Keys, k)
		}
	})
	return l, nil
}

// FoldersHolding implements storage.FolderLister: a map look-up per
// folder.
func (s *Store) FoldersHolding(ctx context.Context, prefix, name string) ([]string, error) {
	if err := checkPrefix(ctx, "list", prefix); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &storage.Error{Op: "list", Key: prefix, Err: errClosed}
	}
	var out []string
	children(under(s.index(), prefix), prefix, func(k string, folder bool) {
		if _, ok := s.objs[k+name]; folder && ok {
			out = append(out, k)
		}
	})
	return out, nil
}

// Walk implements storage.Store. It calls fn, in key order, on the
// objects (not the markers) present when it started, outside the store's lock (so fn may
// read or write the store).
func (s *Store) Walk(ctx context.Context, prefix string, fn func(string, storage.Attrs) error) error {
	if err := checkPrefix(ctx, "walk", prefix); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return &storage.Error{Op: "walk", Key: prefix, Err: errClosed}
	}
	var keys []string
	var attrs []storage.Attrs
	for _, k := range under(s.index(), prefix) {
		if !marker(k) {
			keys = append(keys, k)
			attrs = append(attrs, s.objs[k].attrs)
		}
	}
	s.mu.Unlock()
	for i, k := range keys {
		if err := ctx.Err(); err != nil {
			return &storage.Error{Op: "walk", Key: prefix, Err: err}
		}
		if err := fn(k, attrs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Put implements storage.Writer: it stores a copy of data as a new
// version of key.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := check(ctx, "put", key); err != nil {
		return err
	}
	data = slices.Clone(data)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return &storage.Error{Op: "put", Key: key, Err: errClosed}
	}
	s.seq++
	a := storage.Attrs{Size: int64(len(data)), ETag: "m" + strconv.FormatUint(s.seq, 36), Modified: s.tick()}
	if _, ok := s.objs[key]; !ok {
		s.pending = append(s.pending, key)
	}
	s.objs[key] = &object{data: data, attrs: a}
	return nil
}

// Delete implements storage.Writer. Deleting a missing key is not an
// error (as in object stores).
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := check(ctx, "delete", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return &storage.Error{Op: "delete", Key: key, Err: errClosed}
	}
	if _, ok := s.objs[key]; ok {
		delete(s.objs, key)
		keys := s.index()
		i, _ := slices.BinarySearch(keys, key)
		s.sorted = slices.Delete(keys, i, i+1)
	}
	return nil
}

// Close implements storage.Store: it drops the objects; later calls fail
// with storage.ErrUnavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("memstore: closed twice")
	}
	s.closed = true
	s.objs, s.sorted, s.pending = nil, nil, nil
	return nil
}

var (
	_ storage.Writer       = (*Store)(nil)
	_ storage.FolderLister = (*Store)(nil)
	_ storage.BatchStarter = (*Store)(nil)
)
