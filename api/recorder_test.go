package api_test

import (
	"bytes"
	"io"
	"net/http"
)

// recorder is a minimal ResponseWriter for in-process requests.
type recorder struct {
	h        http.Header
	code     int
	buf      bytes.Buffer
	panicked string
}

func newRecorder() *recorder { return &recorder{h: http.Header{}, code: 200} }

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(c int)           { r.code = c }
func (r *recorder) Write(p []byte) (int, error) { return r.buf.Write(p) }
func (r *recorder) body() io.Reader             { return &r.buf }
