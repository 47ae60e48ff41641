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

// drain reads r to the end, returning its length and last 4 KiB.
func drain(r io.Reader) (int64, []byte, error) {
	buf := make([]byte, 64<<10)
	tail := make([]byte, 0, 8<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		tail = append(tail, buf[:k]...)
		if len(tail) > 4<<10 {
			tail = append(tail[:0], tail[len(tail)-4<<10:]...)
		}
		if err == io.EOF {
			return n, tail, nil
		}
		if err != nil {
			return n, tail, err
		}
	}
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
