package zvf_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
)

// movedClockStore is a store whose clock (Now) the test moves.
type movedClockStore struct {
	storage.Store
	now atomic.Int64
}

func (c *movedClockStore) Now() time.Time { return time.Unix(0, c.now.Load()) }

func (c *movedClockStore) advance(d time.Duration) { c.now.Add(int64(d)) }

// TestLevelTableStorageErrorBacksOff: a level whose table cannot be built
// because the backend fails a read of one of its chunks (an outage, a
// denied object) was built again by every request, each build reading
// every chunk the cache lacks, back to back for as long as requests came,
// and not a word was logged. Now a failed build is logged, naming the
// level and the error, and the next waits a while (longer after each
// failure); once the backend answers, the table is built and answers.
func TestLevelTableStorageErrorBacksOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	fs := faultstore.New(storage.Sub(st, "streamlines"), nil)
	clock := &movedClockStore{Store: fs}
	clock.now.Store(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC).UnixNano())
	var logs syncBuffer
	s, err := zvf.Open(ctx, clock, zvf.Options{Name: "lines", Cache: cache.New(256 << 20),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(1)
	keys := l.Keys()
	bad := keys[len(keys)-1]
	fs.Add(&faultstore.Rule{Key: fmt.Sprintf("1/vertices/%d.%d.%d/", bad[0], bad[1], bad[2]), Fault: faultstore.Fault{Err: errors.New("503 Slow Down")}})
	min, max := firstCell(l)
	q := zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true}
	want, _ := tableAnswer(t, l, q)
	answer := func(i int) {
		t.Helper()
		zvf.WaitTableBuilds(s)
		if got, _ := tableAnswer(t, l, q); string(got) != string(want) {
			t.Fatalf("answer %d of one box differs", i)
		}
		zvf.WaitTableBuilds(s)
	}
	for i := range 10 {
		answer(i)
		clock.advance(10 * time.Millisecond)
	}
	if b := zvf.TableBuilds(l); b != 1 {
		t.Fatalf("10 answers within a moment of a build that failed on the backend: %d builds, want 1", b)
	}
	if got := logs.String(); !strings.Contains(got, "level table") || !strings.Contains(got, "level=1") || !strings.Contains(got, "503 Slow Down") {
		t.Fatalf("log of the failed build: %q, want it to name the level table, the level and the error", got)
	}
	clock.advance(time.Minute)
	answer(10)
	if b := zvf.TableBuilds(l); b != 2 {
		t.Fatalf("an answer a minute after the failure: %d builds, want a second", b)
	}
	// The backend recovers: the next build, once its wait has passed,
	// keeps a table, which answers.
	fs.Reset()
	answer(11)
	if b := zvf.TableBuilds(l); b != 2 {
		t.Fatalf("an answer just after the second failure: %d builds, want still 2 (the wait grew)", b)
	}
	clock.advance(time.Hour)
	answer(12)
	answer(13)
	if b, a := zvf.TableBuilds(l), zvf.TableAnswers(l); b != 3 || a == 0 {
		t.Fatalf("after the backend recovered: %d builds, %d table answers; want 3 builds and answers from the table", b, a)
	}
}
