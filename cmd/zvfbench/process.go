package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
)

// zvfserve server processes, for the benchmarks that measure a server
// apart from its clients (whole, sweep): started, watched and stopped.

// serverAndStores is what the benchmarks that start server processes run
// and where their stores go: serverBin (default: the zvfserve binary
// zvfserveBin finds) and storeDir (default: a temporary folder, removed by
// cleanup).
func serverAndStores(serverBin, storeDir string, stderr io.Writer) (bin, dir string, cleanup func(), err error) {
	bin, dir, cleanup = serverBin, storeDir, func() {}
	if bin == "" {
		if bin, err = zvfserveBin(); err != nil {
			return "", "", nil, err
		}
		fmt.Fprintf(stderr, "zvfbench: the servers are %s\n", bin)
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "zvfserve-bench-"); err != nil {
			return "", "", nil, err
		}
		cleanup = func() { _ = os.RemoveAll(dir) }
		fmt.Fprintln(stderr, "zvfbench: the stores are written to a temporary folder and removed after; give --store to keep them for later runs")
	}
	return bin, dir, cleanup, nil
}

// zvfserveBin finds a zvfserve binary to serve with when --server-bin is
// not given: the one beside this zvfbench (go build -o DIR/ ./cmd/...
// builds both there), else the one on PATH.
func zvfserveBin() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "zvfserve")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("zvfserve"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: no zvfserve beside zvfbench or on PATH to start servers with: build both into one folder (go build -o DIR/ ./cmd/zvfserve ./cmd/zvfbench) or give --server-bin", cli.ErrUsage)
}

// serverProcess is a `zvfserve serve` child.
type serverProcess struct {
	cmd    *exec.Cmd
	base   string
	exited chan error
	stderr *tailBuffer
}

// startServerProcess runs bin with args and waits until it says where it
// listens.
func startServerProcess(ctx context.Context, bin string, args []string) (*serverProcess, error) {
	cmd := exec.Command(bin, args...)
	p := &serverProcess{cmd: cmd, exited: make(chan error, 1), stderr: &tailBuffer{max: 16 << 10}}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if i := strings.Index(sc.Text(), " on http://"); i >= 0 {
				found <- strings.TrimSuffix(sc.Text()[i+4:], "/")
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		p.exited <- cmd.Wait()
	}()
	select {
	case p.base = <-found:
		return p, nil
	case err := <-p.exited:
		p.exited <- err
		return nil, fmt.Errorf("the server exited (%v): %s", err, p.stderr)
	case <-time.After(2 * time.Minute):
	case <-ctx.Done():
	}
	p.kill()
	return nil, fmt.Errorf("the server did not start: %s", p.stderr)
}

// peakRSSMB is the server's high-water resident set (Linux).
func (p *serverProcess) peakRSSMB() float64 {
	return vmHWMMB(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
}

// stop sends SIGTERM and waits for the process to exit.
func (p *serverProcess) stop(wait time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			return fmt.Errorf("the server exited with %v after SIGTERM: %s", err, p.stderr)
		}
		return nil
	case <-time.After(wait):
		return fmt.Errorf("the server was still running %v after SIGTERM", wait)
	}
}

func (p *serverProcess) kill() {
	select {
	case err := <-p.exited:
		p.exited <- err
	default:
		_ = p.cmd.Process.Kill()
		p.exited <- <-p.exited
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

func peakRSSMB() float64 { return vmHWMMB("/proc/self/status") }

// vmHWMMB reads a process's peak resident set from its /proc status file.
func vmHWMMB(status string) float64 {
	b, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}
