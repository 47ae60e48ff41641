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

// contentSecurityPolicy lets the page run only its own modules and
// styles, fetch only from its own server and be framed by no one: the
// page shows names a store chooses (attributes, labels, axes), so were
// one of them ever to reach the DOM as markup, it still could not run.
// Inline style attributes are not allowed either; the scripts set styles
// through the CSSOM, which the policy does not govern.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

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
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		// For browsers that predate frame-ancestors.
		h.Set("X-Frame-Options", "DENY")
		// The page's URL holds the view (stores, filters): the Neuroglancer
		// link and any other page it opens are not told it.
		h.Set("Referrer-Policy", "no-referrer")
		files.ServeHTTP(w, r)
	})
}
