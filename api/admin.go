package api

import (
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
)

// AdminHandler serves /metrics and /debug/pprof for the admin listener.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.m.handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", s.cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// cmdline is pprof's cmdline endpoint with secrets redacted: the token,
// wherever it appears among the arguments, and the query string of any
// URL argument (store URLs may carry credentials there).
func (s *Server) cmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		args[i] = redactArg(a, s.o.Token)
	}
	_, _ = io.WriteString(w, strings.Join(args, "\x00"))
}

func redactArg(a, token string) string {
	const redacted = "[redacted]"
	if token != "" {
		a = strings.ReplaceAll(a, token, redacted)
	}
	if i := strings.Index(a, "://"); i >= 0 {
		if j := strings.IndexByte(a[i:], '?'); j >= 0 {
			a = a[:i+j] + "?" + redacted
		}
	}
	return a
}
