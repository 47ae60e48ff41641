package api

import (
	"context"
	"net/http"
	"regexp"
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
		NotModified:    s.notModified,
		ContentCoding:  contentCoding,
		Cache:          c,
		MaxAnnotations: s.o.MaxVertices,
		Sharded:        s.o.NGSharded,
		Now:            s.o.Now,
	})
}

// descriptor is what GET /api/v1/stores/{store} answers: the store's
// Info, and its Neuroglancer sources with a ready viewer state.
type descriptor struct {
	*zvf.Info
	// Queryables is the URL of the store's queryables (what a filter may
	// name), absolute with --public-url.
	Queryables   string                    `json:"queryables"`
	Neuroglancer *neuroglancer.Description `json:"neuroglancer,omitempty"`
}

func (s *Server) descriptor(ctx context.Context, st *zvf.Store, base string) descriptor {
	return descriptor{Info: st.Info(), Queryables: base + "/api/v1/stores/" + st.Name() + "/queryables",
		Neuroglancer: neuroglancer.Describe(ctx, st, base)}
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

var hostPattern = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9.-]{0,253})?|\[[0-9A-Fa-f:.]{2,45}\])(:[0-9]{1,5})?$`)

// validHost reports whether h is a host name or address with an optional
// port, nothing else (it goes into URLs and JSON).
func validHost(h string) bool { return hostPattern.MatchString(h) }
