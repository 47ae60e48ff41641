package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// The benchmarks' HTTP client side: reading answers whole or streaming
// them away, and the vertex count at an answer's end.

var errNoFile = errors.New("404 Not Found")

// statusError is an answer other than 200 or 404.
type statusError struct {
	url, status string
	code        int
}

func (e *statusError) Error() string { return fmt.Sprintf("GET %s: %s", e.url, e.status) }

func get(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	var b bytes.Buffer
	if err := getInto(ctx, c, url, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// getInto reads url's body into buf (reset first).
func getInto(ctx context.Context, c *http.Client, url string, buf *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return fmt.Errorf("GET %s: %w", url, errNoFile)
	default:
		return &statusError{url: url, status: resp.Status, code: resp.StatusCode}
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	return err
}

func getJSON(ctx context.Context, c *http.Client, url string, v any) error {
	b, err := get(ctx, c, url)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// benchClient is the load benchmark's HTTP client with the drainers its
// requests share: answers are streamed away through buffers reused from
// one answer to the next, so the client makes no garbage per answer. In
// process it would otherwise set the pace of collections that also mark
// the server's cache, a cost the trivial server's small heap does not pay.
type benchClient struct {
	*http.Client
	drainers sync.Pool // of *drainer
}

func (c *benchClient) drainer() *drainer {
	if d, ok := c.drainers.Get().(*drainer); ok {
		return d
	}
	return newDrainer()
}

// tailKeep is how much of an answer's end a drainer keeps: the binary
// trailer and JSON's closing count and cursor fit in it.
const tailKeep = 4 << 10

// drainer reads answers to the end keeping their last tailKeep bytes.
type drainer struct {
	buf  []byte
	tail []byte
}

func newDrainer() *drainer {
	return &drainer{buf: make([]byte, 64<<10), tail: make([]byte, 0, tailKeep)}
}

// drain reads r to the end, returning its length and last 4 KiB (valid
// until the drainer's next use).
func (d *drainer) drain(r io.Reader) (int64, []byte, error) {
	d.tail = d.tail[:0]
	var n int64
	for {
		k, err := r.Read(d.buf)
		n += int64(k)
		d.keep(d.buf[:k])
		if err == io.EOF {
			return n, d.tail, nil
		}
		if err != nil {
			return n, d.tail, err
		}
	}
}

// keep appends p to the tail, dropping what falls more than tailKeep
// bytes from the end.
func (d *drainer) keep(p []byte) {
	if len(p) >= tailKeep {
		d.tail = append(d.tail[:0], p[len(p)-tailKeep:]...)
		return
	}
	if over := len(d.tail) + len(p) - tailKeep; over > 0 {
		d.tail = append(d.tail[:0], d.tail[over:]...)
	}
	d.tail = append(d.tail, p...)
}

// countVertices reads the last "count" member: the end of a JSON answer or
// the binary trailer block.
func countVertices(tail []byte) int64 {
	i := bytes.LastIndex(tail, []byte(`"count":`))
	if i < 0 {
		return 0
	}
	j := i + 8
	for j < len(tail) && tail[j] >= '0' && tail[j] <= '9' {
		j++
	}
	n, _ := strconv.ParseInt(string(tail[i+8:j]), 10, 64)
	return n
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
