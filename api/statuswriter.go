package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zvfserve/zvfserve/api/problem"
)

// How a response ended, as logged and counted (the "outcome" label of
// zvfserve_http_requests_total). Every outcome but complete means the
// client got a cut response: the connection (HTTP/1.1) or stream (HTTP/2)
// was aborted, never ended as if the body were whole.
const (
	outcomeComplete     = "complete"     // all of it went out, whatever its status
	outcomeError        = "error"        // the server failed after the answer had started (storage, corrupt data, a panic)
	outcomeStalled      = "stalled"      // the client took nothing for StallTimeout
	outcomeDisconnected = "disconnected" // the connection closed under it (the client left, or shutdown's grace ran out)
	outcomeTimeout      = "timeout"      // StreamTimeout passed while it streamed, or RequestTimeout between two writes
)

// stallSlice is the most one write carries under one stall deadline where
// deadlines are not progress deadlines (HTTP/2, or a server not built by
// HTTPServer): there a client must take at least this much every
// StallTimeout (64 KiB per 10 s by default, slower than any link a viewer
// is used over).
const stallSlice = 64 << 10

// errStreamCut is what a write returns once the stream's time is up.
var errStreamCut = fmt.Errorf("response cut at the stream time limit: %w", context.DeadlineExceeded)

// statusWriter is the outermost ResponseWriter. It remembers the status,
// the bytes and how the response ended; keeps token-mode answers out of
// shared caches; and gives every write a deadline, set just before it and
// cleared after it, so that a client that stops reading is cut (and its
// slot freed) while one that reads slowly but steadily is not, and a
// handler still working out its answer is never cut by a deadline. On an
// HTTP/1.1 connection of HTTPServer the deadline is a progress deadline
// (see limitedConn); elsewhere writes are cut into stallSlice pieces.
type statusWriter struct {
	http.ResponseWriter
	rc        *http.ResponseController
	stall     time.Duration
	deadlines bool // the writer below takes deadlines (a test recorder does not)
	sliced    bool // ... but not as progress deadlines
	private   bool // token mode: no response may be stored by a shared cache
	// clock is the request's clock (see timeout); nil outside timeout.
	// Once the answer streams it ends work stretches: each stretch between
	// two writes (a chunk read among them) gets workLimit, as the work
	// before the first byte did, and a write waiting on its client (then
	// a wait for the work slot again) runs under streamEnd alone (the
	// stall deadline bounds the write). Without that a
	// backend read that hung mid-answer held the client, a work slot and
	// the read until streamEnd.
	clock     *requestCtx
	streamEnd time.Time
	workLimit time.Duration
	// slot is the request's work slot (see throttle), given back while a
	// write waits on the client; nil outside throttle. It points to work,
	// so that holding one costs no allocation.
	slot *slot
	work slot

	vary []string // Vary tokens every response carries (the CORS middleware's Origin)
	// star: the request is a GET or HEAD with If-None-Match: *, which
	// matches any current representation. Only the handler knows whether
	// there is one: its 200 (or 206) goes out as 304 without a body, its
	// 404 as it is.
	star    bool
	discard bool // the answer became a 304 or a 412: its body is dropped
	// unmatched: the request's If-Match names none of the answer's ETags
	// (notModified found it). The handler's 200 or 206 goes out as this
	// 412 problem, and its next write fails with errPreconditionFailed so
	// that it stops; an error it answers (a missing object's 404) goes out
	// as it is, as RFC 9110 13.2.1 has it. unmatchedReq is the request,
	// for the problem's instance.
	unmatched    *problem.Details
	unmatchedReq *http.Request
	refused      bool // the 412 has been sent
	// ifMatch: the request's If-Match values, judged again as a 2xx
	// starts against the ETag it carries. An answer notModified judged
	// passes (it carries the tag it matched); one that has no ETag (the
	// catalog, health, metrics, the viewer's files) matches only "*"
	// (RFC 9110 13.1.1: there is no current tag the list could name).
	ifMatch []string
	req     *http.Request

	status  int
	problem problem.Kind // the type of the problem answered, if one was
	bytes   int64
	started bool
	werr    error // the first failed write
	stalled bool  // it failed at its stall deadline

	// vals back the header values set through setHeader: one slice each
	// from here rather than a fresh []string per header.
	vals  [12]string // a bbox answer sets nine
	nvals int

	// Set from the request clock's goroutine.
	streaming atomic.Bool // started, as the clock sees it
	expired   atomic.Bool // the request's time ran out
	cutting   atomic.Bool // ... while it streamed: no more writes
}

// init sets up a zero statusWriter over w; rc is where it keeps w's
// ResponseController (both live in the request's reqState).
func (sw *statusWriter) init(w http.ResponseWriter, rc *http.ResponseController, r *http.Request, stall time.Duration, private bool) {
	*rc = *http.NewResponseController(w)
	sw.ResponseWriter, sw.rc, sw.stall, sw.private, sw.status = w, rc, stall, private, http.StatusOK
	sw.star = (r.Method == http.MethodGet || r.Method == http.MethodHead) && matchesAny(reqHeader(r, "If-None-Match"))
	sw.ifMatch, sw.req = r.Header["If-Match"], r
	// Clear whatever deadline the server set (its WriteTimeout, or the
	// previous request's on this connection): on HTTP/2 it would reset the
	// stream when it fired, writing or not.
	sw.deadlines = sw.rc.SetWriteDeadline(time.Time{}) == nil
	progress, _ := r.Context().Value(progressConnKey).(bool)
	sw.sliced = sw.deadlines && (!progress || r.ProtoMajor >= 2)
}

// errPreconditionFailed is what a write returns once the answer has
// become a 412 (see statusWriter.unmatched): the handler stops there, and
// wrap takes it for the answer it is, not a failure.
var errPreconditionFailed = errors.New("the answer was refused: If-Match names none of its ETags")

func (w *statusWriter) WriteHeader(code int) {
	if w.unmatched == nil && !w.started && !w.refused && len(w.ifMatch) > 0 && w.unjudged(code) {
		w.unmatched, w.unmatchedReq = problem.New(problem.PreconditionFailed,
			"If-Match names no current ETag of this answer: it has no ETag, so only If-Match: * matches it"), w.req
	}
	// A 412 from http.ServeContent (a Range read, a viewer's file) is
	// this one too.
	if p := w.unmatched; !w.started && p != nil && (code >= 200 && code < 300 || code == http.StatusPreconditionFailed) {
		w.unmatched = nil
		h := w.Header()
		for _, k := range []string{"Trailer", "Content-Range", "Accept-Ranges"} { // the answer's, not the problem's
			h.Del(k)
		}
		problem.Write(w, w.unmatchedReq, p)
		w.problem = p.Kind()
		w.discard, w.refused = true, true
		return
	}
	if !w.started && w.star && (code == http.StatusOK || code == http.StatusPartialContent) {
		code = http.StatusNotModified
		w.discard = true
		h := w.Header()
		for _, k := range []string{"Content-Length", "Content-Range", "Content-Type", "Trailer"} {
			h.Del(k)
		}
	}
	w.start(code)
	w.ResponseWriter.WriteHeader(code)
}

// unjudged reports whether an answer starting with code fails the
// request's If-Match where notModified did not judge it: a 2xx whose ETag
// (none, or one set elsewhere) the list does not name, or the bare 412 of
// http.ServeContent, which judged it the same way but says nothing.
func (w *statusWriter) unjudged(code int) bool {
	h := w.Header()
	if code == http.StatusPreconditionFailed {
		return h.Get("Content-Type") != "application/problem+json"
	}
	if code < 200 || code >= 300 {
		return false
	}
	if etag := h.Get("Etag"); etag != "" {
		return !matchesStrong(w.ifMatch, etag)
	}
	for _, v := range w.ifMatch {
		if matchesAny(v) {
			return false
		}
	}
	return true
}

// matchesAny reports whether an If-None-Match header lists "*".
func matchesAny(inm string) bool {
	for inm != "" {
		var tag string
		tag, inm, _ = strings.Cut(inm, ",")
		if strings.TrimSpace(tag) == "*" {
			return true
		}
	}
	return false
}

// start runs once, as the status line and headers are about to go out.
func (w *statusWriter) start(code int) {
	if w.started {
		return
	}
	w.status = code
	w.started = true
	if w.private {
		makePrivate(w.Header())
	}
	for _, v := range w.vary {
		addVary(w.Header(), v)
	}
	w.streaming.Store(true)
	w.working()
}

// working starts a stretch of work on the request's clock: workLimit from
// now, never past streamEnd.
func (w *statusWriter) working() {
	if w.clock != nil {
		end := time.Now().Add(w.workLimit)
		if end.After(w.streamEnd) {
			end = w.streamEnd
		}
		w.clock.extend(end)
	}
}

// waiting lifts the work limit while a write waits on the client.
func (w *statusWriter) waiting() {
	if w.clock != nil {
		w.clock.extend(w.streamEnd)
	}
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if w.refused {
		return 0, errPreconditionFailed
	}
	if w.discard {
		return len(p), nil
	}
	done := 0
	for {
		part := p[done:]
		if w.sliced && len(part) > stallSlice {
			part = part[:stallSlice]
		}
		n, err := w.write(part)
		done += n
		if err != nil || done == len(p) {
			return done, err
		}
	}
}

func (w *statusWriter) write(p []byte) (int, error) {
	if w.werr != nil {
		return 0, w.werr
	}
	deadline, err := w.arm()
	if err != nil {
		return 0, err
	}
	w.waiting()
	w.yield()
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	if err != nil {
		w.fail(err, deadline)
		return n, err
	}
	w.disarm()
	// Waiting for a slot again is not work either: it waits as long as
	// the request lives, as it always has.
	if err := w.resume(); err != nil {
		w.werr = err
		return n, err
	}
	w.working()
	return n, nil
}

// yield gives the work slot back before a write, which may wait on the
// client for as long as the stall timeout allows: waiting is not work.
// Writes that do not block cost a channel receive and send.
func (w *statusWriter) yield() {
	if w.slot != nil {
		w.slot.release()
	}
}

// resume takes a slot again once the write is done, before the handler
// works on.
func (w *statusWriter) resume() error {
	if w.slot == nil {
		return nil
	}
	return w.slot.acquire()
}

// arm sets the stall deadline of the next write.
func (w *statusWriter) arm() (time.Time, error) {
	if !w.deadlines {
		return time.Time{}, nil
	}
	deadline := time.Now().Add(w.stall)
	_ = w.rc.SetWriteDeadline(deadline)
	// After setting ours: cut stores cutting before it sets its deadline,
	// so either we see it here or its deadline replaces ours.
	if w.cutting.Load() {
		w.werr = errStreamCut
		return deadline, errStreamCut
	}
	return deadline, nil
}

func (w *statusWriter) disarm() {
	if w.deadlines {
		_ = w.rc.SetWriteDeadline(time.Time{})
	}
}

func (w *statusWriter) fail(err error, deadline time.Time) {
	w.werr = err
	w.stalled = w.deadlines && !time.Now().Before(deadline)
}

// cut is called by the request's clock when its time runs out: a response
// that is streaming stops at once, even inside a write.
func (w *statusWriter) cut() {
	w.expired.Store(true)
	if w.streaming.Load() && w.deadlines {
		w.cutting.Store(true)
		_ = w.rc.SetWriteDeadline(time.Now())
	}
}

// finish gives what the server still holds (the last buffered bytes, the
// end of a chunked body) one stall deadline to go out once the handler
// has returned.
func (w *statusWriter) finish() {
	if w.werr == nil {
		_, _ = w.arm()
	}
}

// outcome says how the response ended; aborted means it was cut by a
// panic(http.ErrAbortHandler) on its way out. A request answered as its
// client's leaving (499) was disconnected, whether or not the write of
// its problem document happened to fail.
func (w *statusWriter) outcome(ctx context.Context, aborted bool) string {
	switch {
	case w.status == problem.StatusClientClosed:
		return outcomeDisconnected
	case !aborted && w.werr == nil:
		return outcomeComplete
	case w.expired.Load():
		return outcomeTimeout
	case w.stalled:
		return outcomeStalled
	case w.werr != nil || ctx.Err() != nil:
		return outcomeDisconnected
	}
	return outcomeError
}

func (w *statusWriter) committed() bool { return w.started }

func (w *statusWriter) Flush() {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if w.werr != nil || w.discard {
		return
	}
	deadline, err := w.arm()
	if err != nil {
		return
	}
	w.yield()
	if err := w.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		w.fail(err, deadline)
		return
	}
	// (A writer that cannot flush, a benchmark's, has nothing to flush.)
	w.disarm()
	if err := w.resume(); err != nil {
		w.werr = err
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setHeader is w.Header().Set(key, v), with the value's slice taken from
// the request's statusWriter when there is one. Each is a full slice (an
// Add to it copies), never handed out twice.
func setHeader(w http.ResponseWriter, key, v string) {
	sw, ok := w.(*statusWriter)
	if !ok || sw.nvals == len(sw.vals) {
		w.Header().Set(key, v)
		return
	}
	// As Set keys it ("ETag" is "Etag").
	key = headerKey(key)
	i := sw.nvals
	sw.nvals++
	sw.vals[i] = v
	w.Header()[key] = sw.vals[i : i+1 : i+1]
}

// headerKey is textproto.CanonicalMIMEHeaderKey(k): for the keys answers
// set through setHeader without its scan of every byte (about 5 % of the
// handler chain's own CPU in a 1k answer's profile, the reader aside).
func headerKey(k string) string {
	switch k {
	case "ETag":
		return "Etag"
	case "X-Request-Id", "Cache-Control", "Vary", "Server-Timing", "Content-Length", "Content-Type", "Content-Encoding",
		"X-Vertex-Count", "X-Number-Matched":
		return k
	}
	return textproto.CanonicalMIMEHeaderKey(k)
}

// makePrivate keeps a response out of shared caches whatever the handler
// that made it chose (the viewer's files, metrics, data): an authorized
// answer stored by a proxy would be served to clients without the token.
func makePrivate(h http.Header) {
	cc := h.Get("Cache-Control")
	switch {
	case cc == "":
		h.Set("Cache-Control", "private")
	case strings.Contains(cc, "no-store"), strings.Contains(cc, "private"):
	case strings.Contains(cc, "public"):
		h.Set("Cache-Control", strings.Replace(cc, "public", "private", 1))
	default:
		h.Set("Cache-Control", "private, "+cc)
	}
	addVary(h, "Authorization")
}

// addVary adds token to the response's Vary unless it is there already.
func addVary(h http.Header, token string) {
	for _, v := range h.Values("Vary") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return
			}
		}
	}
	h.Add("Vary", token)
}

// reqHeader is r's first value of key, a canonical key, as
// r.Header.Get(key) gives it, without Get's scan of the key to
// canonicalize it: a request's keys are canonical already (net/http
// canonicalizes them as it reads them), and the scans of the eight
// look-ups every request makes were 1.5 % of a 1k answer's instructions.
func reqHeader(r *http.Request, key string) string {
	if v := r.Header[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
