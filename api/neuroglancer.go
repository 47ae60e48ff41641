package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/zvf"
)

// neuroglancerRoutes are the /ng/{store} routes (package neuroglancer)
// behind the API's own store lookup, problem documents, retries on a
// changed store, validators, cache and response limit.
func (s *Server) neuroglancerRoutes() *neuroglancer.Server {
	var c zvf.Cache
	if s.o.Cache != nil {
		c = s.o.Cache
	}
	return neuroglancer.New(neuroglancer.Options{
		Store: s.store,
		Serve: func(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
			return s.wrap(h)
		},
		NotModified:      s.notModified,
		NotModifiedFound: s.notModifiedFound,
		OtherVersion: func(r *http.Request, st *zvf.Store) error {
			return otherVersion(r, st, "a Neuroglancer key")
		},
		ContentCoding:  contentCoding,
		Cache:          c,
		MaxAnnotations: s.o.MaxVertices,
		Sharded:        s.o.NGSharded,
		MaxShardBytes:  s.o.NGMaxShardBytes,
		Now:            s.o.Now,
		Logger:         s.log,
	})
}

// descriptor is what GET /api/v1/stores/{store} answers: the store's
// Info, and its Neuroglancer sources with a ready viewer state.
type descriptor struct {
	*zvf.Info
	// Version is the store version described (its revision): the data
	// routes answer under /api/v1/stores/{store}/v{version}/ from it
	// alone (versioned.go).
	Version string `json:"version"`
	// Queryables is the URL of the store's queryables (what a filter may
	// name), absolute with --public-url.
	Queryables   string                    `json:"queryables"`
	Neuroglancer *neuroglancer.Description `json:"neuroglancer,omitempty"`
}

func (s *Server) descriptor(ctx context.Context, st *zvf.Store, base string) (descriptor, error) {
	ng, err := neuroglancer.Describe(ctx, st, base)
	return descriptor{Info: st.Info(), Version: st.Revision(), Queryables: base + "/api/v1/stores/" + st.Name() + "/queryables",
		Neuroglancer: ng}, err
}

// forwardedHeaders are the proxy headers baseURL reads when they are
// trusted.
var forwardedHeaders = []string{"Forwarded", "X-Forwarded-Host", "X-Forwarded-Proto"}

// baseURL is the absolute URL clients reach this server by, for links
// that must work pasted elsewhere (Neuroglancer sources): --public-url;
// else the request's scheme and Host, or, with TrustProxyHeaders, what the
// proxy in front says (Forwarded's first element, else X-Forwarded-Host
// and -Proto). A host or scheme that is not plainly one is ignored; with
// no usable host the links stay paths on this server ("").
func (s *Server) baseURL(r *http.Request) string {
	if s.o.PublicURL != "" {
		return s.o.PublicURL
	}
	scheme, host := "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if s.o.TrustProxyHeaders {
		fproto, fhost := forwarded(r.Header)
		if fhost != "" && validHost(fhost) {
			host = fhost
		}
		if fproto == "http" || fproto == "https" {
			scheme = fproto
		}
	}
	if !validHost(host) {
		return ""
	}
	return scheme + "://" + host
}

// forwarded reads the protocol and host a proxy reports: RFC 7239
// Forwarded's first element (the proxy nearest the client), else the
// first values of X-Forwarded-Proto and X-Forwarded-Host.
func forwarded(h http.Header) (proto, host string) {
	if f := h.Get("Forwarded"); f != "" {
		first, _, _ := strings.Cut(f, ",")
		for _, pair := range strings.Split(first, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(pair), "=")
			v = strings.Trim(v, `"`)
			switch strings.ToLower(k) {
			case "proto":
				proto = strings.ToLower(v)
			case "host":
				host = v
			}
		}
		return proto, host
	}
	first := func(v string) string {
		v, _, _ = strings.Cut(v, ",")
		return strings.TrimSpace(v)
	}
	return strings.ToLower(first(h.Get("X-Forwarded-Proto"))), first(h.Get("X-Forwarded-Host"))
}

// validHost reports whether h is a host name or address with an optional
// port, nothing else (it goes into URLs and JSON): a letter or digit and up
// to 253 letters, digits, '.' or '-', or 2 to 45 hex digits, ':' or '.' in
// brackets; then, optionally, ':' and 1 to 5 digits. (Checked by hand: the
// regexp it replaces cost every process start ~0.6 ms and 1,000 allocations
// to compile.)
func validHost(h string) bool {
	host, port := h, ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return false
		}
		host, port = h[1:end], h[end+1:]
		if len(host) < 2 || len(host) > 45 || strings.Trim(host, "0123456789abcdefABCDEF:.") != "" {
			return false
		}
	} else {
		if i := strings.IndexByte(h, ':'); i >= 0 {
			host, port = h[:i], h[i:]
		}
		if len(host) == 0 || len(host) > 254 || !isAlnum(host[0]) {
			return false
		}
		for i := 1; i < len(host); i++ {
			if c := host[i]; !isAlnum(c) && c != '.' && c != '-' {
				return false
			}
		}
	}
	if port == "" {
		return true
	}
	digits := port[1:]
	return port[0] == ':' && len(digits) >= 1 && len(digits) <= 5 && strings.Trim(digits, "0123456789") == ""
}
