// Package web is the viewer zvfserve serves at /: plain ES modules and
// WebGL2, embedded in the binary, no build step.
package web

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy lets the page run only its own modules and
// styles and fetch only from its own server: the page shows names a store
// chooses (attributes, labels, axes), so were one of them ever to reach
// the DOM as markup, it still could not run. Inline style attributes are
// not allowed either; the scripts set styles through the CSSOM, which the
// policy does not govern. frame-ancestors follows it (Options).
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors "

// Options configure the viewer's files.
type Options struct {
	// FrameAncestors lists the pages that may show the viewer in a frame,
	// as Content-Security-Policy sources separated by spaces: "'self'
	// http://localhost:8888" lets a Jupyter notebook there embed it in an
	// IFrame. Empty: no page may (clickjacking). See CheckFrameAncestors.
	FrameAncestors string
}

// CheckFrameAncestors refuses a list of sources that would not stay one
// directive of the policy (a ';' or ',' would start another) or one
// header (control characters).
func CheckFrameAncestors(s string) error {
	for _, r := range s {
		if r == ';' || r == ',' || (r < 0x21 && r != ' ') || r > 0x7e {
			return fmt.Errorf("%q: sources separated by spaces (such as 'self' http://localhost:8888), in printable ASCII, without ';' or ','", s)
		}
	}
	return nil
}

// Handler serves the viewer's files.
func Handler(o Options) http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// The embedded tree is fixed at build time; fs.Sub cannot fail on it.
		panic(err)
	}
	files := http.FileServerFS(sub)
	ancestors := strings.Join(strings.Fields(o.FrameAncestors), " ")
	if ancestors == "" || CheckFrameAncestors(o.FrameAncestors) != nil {
		ancestors = "'none'"
	}
	csp := contentSecurityPolicy + ancestors
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", csp)
		if ancestors == "'none'" {
			// For browsers that predate frame-ancestors; it cannot name
			// the pages a list allows.
			h.Set("X-Frame-Options", "DENY")
		}
		// The page's URL holds the view (stores, filters): the Neuroglancer
		// link and any other page it opens are not told it.
		h.Set("Referrer-Policy", "no-referrer")
		files.ServeHTTP(w, r)
	})
}
