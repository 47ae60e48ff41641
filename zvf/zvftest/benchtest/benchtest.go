// Package benchtest reads what a benchmark costs beside wall time: CPU
// time, which holds up on a loaded machine where wall time mostly
// measures the wait for a core, and the time goroutines spent blocked on
// mutexes. It imports nothing of zvfserve, so any package's benchmarks
// can use it.
package benchtest

import (
	"runtime/metrics"
	"syscall"
	"testing"
	"time"
)

// CPU is the user and system CPU time the process has used.
func CPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MutexWait is the time goroutines have spent blocked on sync.Mutex and
// sync.RWMutex (and the runtime's own locks).
func MutexWait() time.Duration {
	s := []metrics.Sample{{Name: "/sync/mutex/wait/total:seconds"}}
	metrics.Read(s)
	return time.Duration(s[0].Value.Float64() * 1e9)
}

// A Meter reports, per operation of b's loop, what the process spent
// since Start.
type Meter struct {
	b         *testing.B
	cpu, wait time.Duration
}

// Start reads the process's CPU time and mutex wait now.
func Start(b *testing.B) Meter {
	return Meter{b: b, wait: MutexWait(), cpu: CPU(b)}
}

// ReportCPU reports the CPU time per operation since Start, as cpu-ns/op.
func (m Meter) ReportCPU() {
	m.b.ReportMetric(float64(CPU(m.b)-m.cpu)/float64(m.b.N), "cpu-ns/op")
}

// ReportMutexWait reports the mutex wait per operation since Start, as
// mutex-wait-ns/op.
func (m Meter) ReportMutexWait() {
	m.b.ReportMetric(float64(MutexWait()-m.wait)/float64(m.b.N), "mutex-wait-ns/op")
}

// Loop calls f once to warm what it reads (caches, pools), then runs it
// in b's loop, reporting allocations and CPU time per call beside wall
// time: the shape of every warm benchmark here.
func Loop(b *testing.B, f func()) {
	f()
	b.ReportAllocs()
	b.ResetTimer()
	m := Start(b)
	for b.Loop() {
		f()
	}
	m.ReportCPU()
}
