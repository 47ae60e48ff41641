package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api/suggest"
)

// Every route's query parameters, from the route table (routes.go):
// requests are checked against them before a handler runs (a mistyped name is a 400 that names it
// and lists the valid ones, instead of an answer with defaults), and a test
// holds the OpenAPI document's parameter lists equal to it.

// paramSpec is one query parameter of a route.
type paramSpec struct {
	name string
	// values, when set, lists every value the parameter takes.
	values []string
}

// RouteParams lists the query parameters of every API route, by route
// pattern. The table is the contract; OpenAPI documents it.
func RouteParams() map[string][]string {
	out := map[string][]string{}
	for _, rt := range apiRoutes() {
		names := make([]string, len(rt.params))
		for i, p := range rt.params {
			names[i] = p.name
		}
		sort.Strings(names)
		out[rt.pattern] = names
	}
	return out
}

// routeParams is the parameter table checkParams looks requests up in.
func routeParams() map[string][]paramSpec {
	out := map[string][]paramSpec{}
	for _, rt := range apiRoutes() {
		out[rt.pattern] = rt.params
	}
	return out
}

// checkParams refuses query parameters the route does not take, repeated
// parameters, and values outside a parameter's list.
func checkParams(table map[string][]paramSpec, r *http.Request, q queryArgs) error {
	pattern := strings.TrimSuffix(chi.RouteContext(r.Context()).RoutePattern(), "/")
	specs, ok := table[pattern]
	if !ok {
		return nil
	}
	var unknown []string
	for j, a := range q {
		name := a.k
		if q[:j].Has(name) {
			continue // its first setting was checked
		}
		i := slices.IndexFunc(specs, func(p paramSpec) bool { return p.name == name })
		if i < 0 {
			unknown = append(unknown, name)
			continue
		}
		if n := q[j:].count(name); n > 1 {
			return badRequest(fmt.Sprintf("parameter %s is given %d times; give it once", name, n))
		}
		if vals := specs[i].values; vals != nil && !slices.Contains(vals, a.v) {
			return badRequest(fmt.Sprintf("%s=%q: use %s", name, a.v, orList(vals)))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	valid := make([]string, len(specs))
	for i, p := range specs {
		valid[i] = p.name
	}
	sort.Strings(valid)
	msg := "unknown parameter"
	if len(unknown) > 1 {
		msg += "s"
	}
	for i, u := range unknown {
		if i > 0 {
			msg += ","
		}
		msg += " " + u
		if s := closest(u, valid); s != "" {
			msg += " (did you mean " + s + "?)"
		}
	}
	if len(valid) == 0 {
		return badRequest(msg + "; this route takes no parameters")
	}
	return badRequest(msg + "; this route takes " + strings.Join(valid, ", "))
}

// closest is the valid name nearest to u by edit distance, when near
// enough to be a typo (or a known synonym).
func closest(u string, valid []string) string {
	synonyms := map[string]string{"format": "f", "attribute": "attributes", "lod": "level", "bbox": "min"}
	if s, ok := synonyms[u]; ok && slices.Contains(valid, s) {
		return s
	}
	return suggest.Nearest(u, valid)
}

// queryArg is one setting of a query string, unescaped.
type queryArg struct{ k, v string }

// queryArgs is a request's query, its settings in the order given: what
// url.Values holds, without a map to build for every request (a
// handler looks up a few names among a few settings).
type queryArgs []queryArg

// Get is k's first value, or "" (as url.Values.Get).
func (q queryArgs) Get(k string) string {
	for _, a := range q {
		if a.k == k {
			return a.v
		}
	}
	return ""
}

// Has says whether the query gives k (as url.Values.Has).
func (q queryArgs) Has(k string) bool {
	for _, a := range q {
		if a.k == k {
			return true
		}
	}
	return false
}

// count is how many times the query gives k.
func (q queryArgs) count(k string) int {
	n := 0
	for _, a := range q {
		if a.k == k {
			n++
		}
	}
	return n
}

// parseQuery reads raw's settings as url.ParseQuery does, appended to
// buf[:0] (a request's keeps room for a usual query: no allocation).
// Like url.ParseQuery it skips a setting it cannot read (a bad percent
// escape, an unescaped ';') and reads on; unlike URL.Query, it returns
// that setting as bad (the first one), so the request is refused rather
// than answered without it.
func parseQuery(raw string, buf queryArgs) (q queryArgs, bad string) {
	q = buf[:0]
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		if kv == "" {
			continue
		}
		if strings.Contains(kv, ";") {
			if bad == "" {
				bad = kv
			}
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k, err := url.QueryUnescape(k)
		if err == nil {
			v, err = url.QueryUnescape(v)
		}
		if err != nil {
			if bad == "" {
				bad = kv
			}
			continue
		}
		q = append(q, queryArg{k, v})
	}
	return q, bad
}

// badSetting is the 400 for a query setting that cannot be read.
func badSetting(kv string) error {
	return badRequest(fmt.Sprintf("query setting %q cannot be read (a bad %%-escape or an unescaped ';'): escape '%%' as %%25 and ';' as %%3B", kv))
}
