// Package web is the viewer zvfserve serves at /: plain ES modules and
// WebGL2, embedded in the binary, no build step.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the viewer's files.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// The embedded tree is fixed at build time; fs.Sub cannot fail on it.
		panic(err)
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
