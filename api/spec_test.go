package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

// closeSchemas sets additionalProperties: false on every object schema
// that lists its properties and says nothing about others, so that a
// response member the document does not declare fails validation.
func closeSchemas(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var visit func(r *openapi3.SchemaRef)
	visit = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil || seen[r.Value] {
			return
		}
		s := r.Value
		seen[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			no := false
			s.AdditionalProperties.Has = &no
		}
		for _, p := range s.Properties {
			visit(p)
		}
		visit(s.Items)
		visit(s.AdditionalProperties.Schema)
		for _, group := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
			for _, x := range group {
				visit(x)
			}
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, resp := range op.Responses.Map() {
				if resp.Value == nil {
					continue
				}
				for _, mt := range resp.Value.Content {
					visit(mt.Schema)
				}
			}
		}
	}
}

// TestResponsesDeclareEveryMember: every member of every JSON answer is
// in openapi.yaml (validation with closed object schemas).
func TestResponsesDeclareEveryMember(t *testing.T) {
	t.Parallel()
	doc, router := loadSpec(t)
	closeSchemas(doc)
	_, ts := newServer(t, api.Options{UI: http.NotFoundHandler()})
	for _, path := range []string{
		"/api/v1/stores",
		"/api/v1/stores/points_pyramid",
		"/api/v1/stores/mesh",
		"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=500,500,500&attributes=*&limit=50",
		"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=1000,1000,1000&level=auto",
		"/api/v1/stores/graph/bbox?min=390,223,585&max=480,313,675",
		"/api/v1/stores/mesh/bbox?min=150,150,150&max=250,250,250",
		"/api/v1/stores/points_pyramid/objects/0?attributes=*",
		"/api/v1/stores/skeleton/objects/1",
		"/api/v1/stores/points_pyramid/objects/0/manifest?level=1",
		"/api/v1/stores/graph/objects/0/manifest",
		"/api/v1/stores/points_pyramid/objects/3/levels",
		"/api/v1/stores/points_pyramid/groups/0",
		"/api/v1/stores/graph/levels/0/chunks",
		"/api/v1/stores/graph/levels/0/chunks/3.4.2",
		"/api/v1/stores/polylines/levels/0/chunks/0.0.1",
		"/api/v1/stores/skeleton/levels/0/chunks/2.4.6",
		"/api/v1/stores/nope",
		"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=1,1,1&limit=99999999999",
		"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=500,500,500&filter=cell_type%20IN%20('neuron','astrocyte')&sample=0.5&limit=5",
		"/api/v1/stores/points_pyramid/count?min=0,0,0&max=500,500,500&filter=label%3E3",
		"/api/v1/stores/points_pyramid/density?min=0,0,0&max=500,500,500&shape=4,3,2",
		"/api/v1/stores/points_pyramid/queryables",
		"/api/v1/stores/graph/queryables?level=0",
		"/api/v1/stores/points_pyramid/count?min=0,0,0&max=500,500,500&filter=nope%3E3",
		"/ng/points_pyramid/annotations/info",
		"/ng/polylines/annotations/info",
		"/ng/polylines/lines/info",
		"/ng/graph/annotations/info",
		"/ng/skeleton/skeletons/info",
		"/ng/skeleton/skeletons/seg_props/info",
		"/ng/points_pyramid/annotations/spatial0/0_0_0",
		"/ng/mesh/meshes/info",
		"/ng/mesh/meshes/seg_props/info",
		"/ng/mesh/meshes/2:0",
		"/ng/mesh/multilod/info",
		"/ng/nope/annotations/info",
		"/ng/points_pyramid/density/info",
		"/ng/mesh/density/info",
	} {
		t.Run(path, func(t *testing.T) {
			resp, body := apitest.Get(t, ts, path)
			if want := map[bool]int{true: 200, false: resp.StatusCode}[!strings.Contains(path, "nope") && !strings.Contains(path, "99999")]; resp.StatusCode != want || (strings.Contains(path, "nope%3E") && resp.StatusCode != 400) {
				t.Fatalf("status %d: %.300s", resp.StatusCode, body)
			}
			if _, err := checkSpec(router, path, resp, body); err != nil {
				t.Fatalf("%d: a member is not in openapi.yaml: %v\n%.300s", resp.StatusCode, err, body)
			}
		})
	}
}

// TestSpecDeclaresErrorsAndAuth: the document names the bearer scheme
// behind --token, which routes never need it, and the errors each route
// answers with (not only under default).
func TestSpecDeclaresErrorsAndAuth(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	sch := doc.Components.SecuritySchemes["bearer"]
	if sch == nil || sch.Value == nil || sch.Value.Type != "http" || sch.Value.Scheme != "bearer" {
		t.Fatalf("no http bearer security scheme named bearer: %+v", sch)
	}
	if len(doc.Security) == 0 {
		t.Fatal("no document-wide security requirement")
	}
	open := map[string]bool{"/healthz": true, "/readyz": true, "/": true}
	for path, item := range doc.Paths.Map() {
		op := item.Get
		if op == nil {
			continue
		}
		if open[path] {
			if op.Security == nil || len(*op.Security) != 0 {
				t.Errorf("%s: should declare security: [] (it never needs the token)", path)
			}
			continue
		}
		want := []string{"401"}
		if strings.HasPrefix(path, "/api/v1/stores") {
			want = append(want, "503", "504")
		}
		if strings.HasPrefix(path, "/api/v1/stores/{store}") || strings.HasPrefix(path, "/ng/") {
			want = append(want, "400", "404", "422", "502")
		}
		if strings.HasPrefix(path, "/ng/") {
			want = append(want, "503", "504")
		}
		if strings.HasSuffix(path, "/bbox") {
			want = append(want, "409") // a cursor from another store version
		}
		if strings.HasSuffix(path, "/objects/{id}") {
			want = append(want, "413") // objects cannot be paged
		}
		for _, code := range want {
			if op.Responses.Value(code) == nil {
				t.Errorf("%s does not declare %s", path, code)
			}
		}
	}
}

// TestUnauthorizedMatchesSpec: the 401 a token server answers is the one
// documented.
func TestUnauthorizedMatchesSpec(t *testing.T) {
	t.Parallel()
	_, router := loadSpec(t)
	_, ts := newServer(t, api.Options{Token: "s3cret", UI: http.NotFoundHandler()})
	for _, path := range []string{"/api/v1/stores", "/api/v1/stores/graph/bbox?min=0,0,0&max=1,1,1", "/openapi.yaml", "/metrics"} {
		resp, body := apitest.Get(t, ts, path)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		route, err := checkSpec(router, path, resp, body)
		if route != nil && route.Operation.Responses.Value("401") == nil {
			t.Fatalf("%s: 401 is not declared", path)
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}
