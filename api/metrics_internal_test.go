package api

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// TestMetricsObserve: a request is counted under its route, code and
// outcome, and its latency under its route, each series apart; once a
// series exists, counting in it allocates nothing.
func TestMetricsObserve(t *testing.T) {
	m := NewMetrics()
	for range 3 {
		m.observe("/a", 200, outcomeComplete, time.Millisecond)
	}
	m.observe("/a", 404, outcomeComplete, time.Millisecond)
	m.observe("/a", 200, outcomeStalled, time.Millisecond)
	m.observe("/b", 200, outcomeComplete, 2*time.Second)
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"/a", "200", outcomeComplete}, 3},
		{[]string{"/a", "404", outcomeComplete}, 1},
		{[]string{"/a", "200", outcomeStalled}, 1},
		{[]string{"/b", "200", outcomeComplete}, 1},
		{[]string{"/b", "404", outcomeComplete}, 0},
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(tc.labels...)); got != tc.want {
			t.Errorf("requests %v = %v, want %v", tc.labels, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(m.latency); n != 2 {
		t.Errorf("%d latency series, want 2", n)
	}
	alloctest.SkipUnderRace(t)
	if a := testing.AllocsPerRun(100, func() { m.observe("/a", 200, outcomeComplete, time.Millisecond) }); a > 0 {
		t.Errorf("observe allocates %.0f times", a)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("/a", "200", outcomeComplete)); got != 3+101 {
		t.Errorf("requests after the runs = %v, want %d", got, 3+101)
	}
}
