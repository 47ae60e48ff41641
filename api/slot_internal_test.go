package api

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/zvfserve/zvfserve/api/problem"
)

// TestSlotWaitEndedIsTheRequestsEnd: a streaming answer that waits for its
// work slot after a write (all slots taken) and whose request ends there
// fails with why it ended: its client leaving is the 499 logged at debug
// like any other client that left, its time running out the timeout.
// Before, both were an internal error: on a saturated server every client
// that gave up logged an ERROR "request failed" line with status 500.
func TestSlotWaitEndedIsTheRequestsEnd(t *testing.T) {
	t.Parallel()
	s, err := New(Options{MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.slots <- struct{}{} // every slot taken
	defer func() { <-s.slots }()
	left, leave := context.WithCancel(context.Background())
	leave()
	late, stop := context.WithTimeout(context.Background(), 0)
	defer stop()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		status int
		level  slog.Level
	}{
		{"client left", left, problem.StatusClientClosed, slog.LevelDebug},
		{"time ran out", late, http.StatusGatewayTimeout, slog.LevelError},
	} {
		sl := &slot{s: s, ctx: tc.ctx}
		err := sl.acquire()
		if err == nil {
			t.Fatalf("%s: a slot was taken from a full server", tc.name)
		}
		p := classify(err)
		if p.Status != tc.status || failureLevel(p) != tc.level {
			t.Errorf("%s: %v is %d, logged at %v; want %d at %v", tc.name, err, p.Status, failureLevel(p), tc.status, tc.level)
		}
	}
}
