package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// What the fleet test sends and how it judges what comes back: every
// answer is recorded (status, ETag, a hash of the body, how it ended) and
// compared afterwards with what one zvfserve alone answers for the same
// request at each store version.

// reqKey names a request: the same key must get the same answer from any
// replica serving the same store version.
type reqKey struct {
	method string
	path   string // path and query
	enc    string // Accept-Encoding sent ("" for none)
}

func (k reqKey) String() string { return k.method + " " + k.path + " (" + k.enc + ")" }

// answer is what a response said, reduced to what is compared.
type answer struct {
	status     int
	etag       string
	sum        [sha256.Size]byte
	size       int
	next       string // the JSON body's paging cursor
	retryAfter string
	problem    string // a problem's type, last path element
}

func (a answer) same(b answer) bool {
	return a.status == b.status && a.etag == b.etag && a.sum == b.sum
}

// record is one request of the load.
type record struct {
	key        reqKey
	via        string // "nginx" or a replica's name
	inm        string // If-None-Match sent
	start, end time.Time
	headers    bool // a status line and headers arrived
	ans        answer
	upstream   string // nginx's X-Fleet-Upstream
	err        error  // the connection failed or the body did not end cleanly
}

var (
	nextInJSON = regexp.MustCompile(`"next":"([A-Za-z0-9_-]+)"`)
	problemTyp = regexp.MustCompile(`"type":"[^"]*/([a-z-]+)"`)
)

// fleetClient sends requests with a small receive buffer, so that a reader
// that pauses holds the sender up (a slow client, a stream in flight).
func fleetClient(smallBuffer bool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if smallBuffer {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
			return errors.Join(err, serr)
		}
	}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: d.DialContext, DisableCompression: true, MaxIdleConnsPerHost: 16,
			IdleConnTimeout: 5 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// fleetHost is the one name clients reach the fleet by, sent to nginx,
// the replicas and the single node alike: answers that hold absolute URLs
// (the store descriptor's Neuroglancer sources) are built on the Host a
// request names, and nginx passes it on (docs/deploy/nginx.conf), so equal
// requests get equal bytes wherever they land.
const fleetHost = "zvf.fleet.example"

// do sends one request and records its answer; the body is read whole.
func do(ctx context.Context, c *http.Client, base, via string, k reqKey, inm string) record {
	rec := record{key: k, via: via, inm: inm, start: time.Now()}
	defer func() { rec.end = time.Now() }()
	req, err := http.NewRequestWithContext(ctx, k.method, base+k.path, nil)
	if err != nil {
		rec.err = err
		return rec
	}
	req.Host = fleetHost
	if k.enc != "" {
		req.Header.Set("Accept-Encoding", k.enc)
	}
	if inm != "" {
		req.Header.Set("If-None-Match", inm)
	}
	resp, err := c.Do(req)
	if err != nil {
		rec.err = err
		rec.end = time.Now()
		return rec
	}
	defer resp.Body.Close()
	rec.headers = true
	rec.upstream = resp.Header.Get("X-Fleet-Upstream")
	b, err := io.ReadAll(resp.Body)
	rec.ans = reduce(resp, b)
	rec.err = err
	rec.end = time.Now()
	return rec
}

func reduce(resp *http.Response, body []byte) answer {
	a := answer{status: resp.StatusCode, etag: resp.Header.Get("ETag"), sum: sha256.Sum256(body), size: len(body),
		retryAfter: resp.Header.Get("Retry-After")}
	if n := resp.Header.Get("X-Next-Cursor"); n != "" {
		a.next = n
	} else if len(body) > 0 && body[0] == '{' {
		tail := body[max(0, len(body)-600):]
		if m := nextInJSON.FindSubmatch(tail); m != nil {
			a.next = string(m[1])
		}
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		if m := problemTyp.FindSubmatch(body); m != nil {
			a.problem = string(m[1])
		}
	}
	return a
}

// withCursor is the path of the page after p.
func withCursor(p, cursor string) string {
	if i := strings.Index(p, "&cursor="); i >= 0 {
		p = p[:i]
	}
	return p + "&cursor=" + cursor
}

// refs are one store version's answers, from one zvfserve alone.
type refs map[reqKey]answer

// collectRefs asks base for every key, following paging chains to their
// end, and returns the answers.
func collectRefs(ctx context.Context, base string, keys []reqKey) (refs, error) {
	c := fleetClient(false)
	out := refs{}
	for _, k := range keys {
		for pages := 0; ; pages++ {
			if pages > 200 {
				return nil, fmt.Errorf("%s: more than 200 pages", k)
			}
			r := do(ctx, c, base, "single", k, "")
			if r.err != nil {
				return nil, fmt.Errorf("single node: %s: %w", k, r.err)
			}
			out[k] = r.ans
			if r.ans.next == "" || k.method != http.MethodGet {
				break
			}
			k = reqKey{method: k.method, path: withCursor(k.path, r.ans.next), enc: k.enc}
		}
	}
	return out, nil
}

// fleetURLs is the load's menu: bbox tiles at each level of both stores in
// two formats, objects (some of which exist in one version only), store
// descriptions, and paging chains (first pages; the rest follow).
func fleetURLs() (plain, chains []reqKey) {
	for _, st := range []string{"cells", "axons"} {
		for level := range 3 {
			tile := 250 << level
			for x := 0; x < 1000; x += tile {
				for y := 0; y < 1000; y += tile {
					for _, f := range []string{"bin", "json"} {
						p := fmt.Sprintf("/api/v1/stores/%s/bbox?min=%d,%d,0&max=%d,%d,600&level=%d&attributes=*&f=%s", st, x, y, x+tile, y+tile, level, f)
						enc := ""
						if f == "json" && (x/tile+y/tile)%2 == 1 {
							enc = "gzip"
						}
						plain = append(plain, reqKey{http.MethodGet, p, enc})
					}
				}
			}
		}
		for id := 0; id < 400; id += 37 {
			plain = append(plain, reqKey{http.MethodGet, fmt.Sprintf("/api/v1/stores/%s/objects/%d?level=0&f=json", st, id), ""})
		}
		plain = append(plain, reqKey{http.MethodGet, "/api/v1/stores/" + st, ""})
		for level := range 2 {
			chains = append(chains, reqKey{http.MethodGet,
				fmt.Sprintf("/api/v1/stores/%s/bbox?min=0,0,0&max=1000,1000,600&level=%d&limit=4000&f=json", st, level), ""})
		}
	}
	return plain, chains
}

// fleetState is what the workers share with the orchestrator: which
// replicas may be addressed directly, and the records.
type fleetState struct {
	mu      sync.Mutex
	up      map[string]bool // replicas a worker may address directly
	records []record
}

func (s *fleetState) add(r record) {
	s.mu.Lock()
	s.records = append(s.records, r)
	s.mu.Unlock()
}

// pickUp returns a live replica other than not (or nil) and when it was
// picked: a request to a replica picked before it was marked down may
// meet it killed, one picked after never addresses it.
func (s *fleetState) pickUp(rng *rand.Rand, reps []*replica, not string) (*replica, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var live []*replica
	for _, r := range reps {
		if s.up[r.name] && r.name != not {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return nil, time.Time{}
	}
	return live[rng.IntN(len(live))], time.Now()
}

// direct sends k straight to replica r picked at picked.
func (s *fleetState) direct(ctx context.Context, c *http.Client, r *replica, picked time.Time, k reqKey, inm string) record {
	rec := do(ctx, c, r.url(), r.name, k, inm)
	rec.start = picked
	s.add(rec)
	return rec
}

func (s *fleetState) setUp(name string, up bool) {
	s.mu.Lock()
	s.up[name] = up
	s.mu.Unlock()
}

// worker runs mixed requests until stop ends or n requests were sent. A
// request already sent when stop ends runs to its end: the test stops the
// load, never a request.
func (s *fleetState) worker(stop context.Context, seed uint64, lb *nginxProc, reps []*replica, plain, chains []reqKey, n int) {
	ctx := context.WithoutCancel(stop)
	rng := rand.New(rand.NewPCG(seed, 99))
	c := fleetClient(false)
	for i := 0; i < n && stop.Err() == nil; i++ {
		k := plain[rng.IntN(len(plain))]
		switch op := rng.IntN(20); {
		case op < 8: // through the balancer
			s.add(do(ctx, c, lb.url(), "nginx", k, ""))
		case op < 10: // HEAD through the balancer
			s.add(do(ctx, c, lb.url(), "nginx", reqKey{http.MethodHead, k.path, k.enc}, ""))
		case op < 13: // an ETag from one replica, revalidated on another and through the balancer
			a, at := s.pickUp(rng, reps, "")
			if a == nil {
				continue
			}
			first := s.direct(ctx, c, a, at, k, "")
			if first.ans.etag == "" {
				continue
			}
			if b, bt := s.pickUp(rng, reps, a.name); b != nil {
				s.direct(ctx, c, b, bt, k, first.ans.etag)
			}
			s.add(do(ctx, c, lb.url(), "nginx", k, first.ans.etag))
		case op < 17: // paging: each next page from somewhere else
			k := chains[rng.IntN(len(chains))]
			r := do(ctx, c, lb.url(), "nginx", k, "")
			s.add(r)
			for pages := 0; r.err == nil && r.ans.next != "" && pages < 50 && stop.Err() == nil; pages++ {
				k = reqKey{k.method, withCursor(k.path, r.ans.next), k.enc}
				if pages%2 == 0 {
					b, bt := s.pickUp(rng, reps, r.via)
					if b == nil {
						break
					}
					r = s.direct(ctx, c, b, bt, k, "")
				} else {
					r = do(ctx, c, lb.url(), "nginx", k, "")
					s.add(r)
				}
			}
		default: // straight to one replica
			if a, at := s.pickUp(rng, reps, ""); a != nil {
				s.direct(ctx, c, a, at, k, "")
			}
		}
	}
}

// slowStream is a GET whose client stopped reading after the first bytes:
// with a small receive buffer its sender is held mid-answer, in flight.
type slowStream struct {
	rec  record
	resp *http.Response
	head []byte
}

// openSlow sends k and reads the headers and the first 32 KiB.
func openSlow(ctx context.Context, base, via string, k reqKey) (*slowStream, error) {
	s := &slowStream{rec: record{key: k, via: via, start: time.Now()}}
	req, err := http.NewRequestWithContext(ctx, k.method, base+k.path, nil)
	if err != nil {
		return nil, err
	}
	req.Host = fleetHost
	resp, err := fleetClient(true).Do(req)
	if err != nil {
		return nil, err
	}
	s.resp = resp
	s.rec.headers = true
	s.rec.upstream = resp.Header.Get("X-Fleet-Upstream")
	s.head = make([]byte, 32<<10)
	if _, err := io.ReadFull(resp.Body, s.head); err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("first 32 KiB of %s: %w", k, err)
	}
	return s, nil
}

// finish reads the rest of the answer and records it.
func (s *slowStream) finish() record {
	defer s.resp.Body.Close()
	rest, err := io.ReadAll(s.resp.Body)
	s.rec.ans = reduce(s.resp, append(s.head, rest...))
	s.rec.err = err
	s.rec.end = time.Now()
	return s.rec
}
