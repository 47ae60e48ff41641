package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestServeOutlivesItsLogReader: serve keeps serving when whatever reads
// its standard error goes away (a log shipper restarting, `| tee` killed):
// logging is best effort, and a write to the closed pipe must not end the
// process with SIGPIPE — also when it was started with SIGPIPE ignored, as
// systemd's IgnoreSIGPIPE=yes does (the Go runtime installs its own
// handler regardless). Then SIGTERM still ends it cleanly.
func TestServeOutlivesItsLogReader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		ignored bool
	}{{"default", false}, {"started with SIGPIPE ignored", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"serve", "--addr", "127.0.0.1:0", "--revalidate", "0", graphStore}
			cmd := exec.Command(os.Args[0], args...)
			if tc.ignored {
				// An ignored signal stays ignored across exec.
				cmd = exec.Command("/bin/sh", append([]string{"-c", `trap "" PIPE; exec "$0" "$@"`, os.Args[0]}, args...)...)
			}
			cmd.Env = append(os.Environ(), "ZVFSERVE_TEST_AS_COMMAND=1")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{}) // closed once waitErr is set
			var waitErr error
			base := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					if m := listening.FindStringSubmatch(sc.Text()); m != nil {
						base <- m[1]
						break
					}
				}
				_, _ = io.Copy(io.Discard, stdout)
				waitErr = cmd.Wait()
				close(exited)
			}()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			var url string
			select {
			case url = <-base:
			case <-exited:
				t.Fatalf("serve exited before listening: %v", waitErr)
			case <-time.After(30 * time.Second):
				t.Fatal("serve did not start")
			}
			// The log reader goes away: every access-log line from now on
			// is a write to a pipe nobody reads.
			if err := stderr.Close(); err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
			for i := 0; i < 5; i++ {
				resp, err := c.Get(url + "/api/v1/stores/graph")
				if err != nil {
					select {
					case <-exited:
						t.Fatalf("request %d: serve is gone (%v)", i, waitErr)
					case <-time.After(time.Second):
					}
					t.Fatalf("request %d: %v", i, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: status %d", i, resp.StatusCode)
				}
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
				if waitErr != nil {
					t.Fatalf("after SIGTERM: %v", waitErr)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("serve still running 30 s after SIGTERM")
			}
		})
	}
}
