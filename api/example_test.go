package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// A client's side of the API: the vertices in a box as JSON, page by page,
// each next page asked for with the cursor the previous one ends with. An
// edge comes in the page holding its later vertex, its indices counting
// the whole answer, so the pages' edges together are the whole answer's.
func Example() {
	ctx := context.Background()
	st, err := blobstore.Open(ctx, "../testdata/zvf-reference/graph.zarrvectors")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ch := cache.New(64 << 20)
	s, err := zvf.Open(ctx, st, zvf.Options{Name: "graph", Cache: ch})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := api.New(api.Options{Stores: []*zvf.Store{s}, Cache: ch})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	q := url.Values{"min": {"390,223,585"}, "max": {"480,313,675"}, "limit": {"30"}}
	for page := 1; ; page++ {
		resp, err := http.Get(ts.URL + "/api/v1/stores/graph/bbox?" + q.Encode())
		if err != nil {
			log.Fatal(err)
		}
		var body struct {
			Count    int         `json:"count"`
			Vertices [][]float64 `json:"vertices"`
			Edges    [][2]int    `json:"edges"`
			Next     *string     `json:"next"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("page %d: %s, %s, %d vertices (the first %v), %d edges end here\n",
			page, resp.Status, resp.Header.Get("Content-Type"), body.Count, body.Vertices[0], len(body.Edges))
		if body.Next == nil {
			break
		}
		q.Set("cursor", *body.Next)
	}
	// Output:
	// page 1: 200 OK, application/json, 30 vertices (the first [449.34833 287.55643 594.07074]), 20 edges end here
	// page 2: 200 OK, application/json, 30 vertices (the first [437.63992 244.0549 644.70483]), 35 edges end here
	// page 3: 200 OK, application/json, 19 vertices (the first [472.85318 243.59445 615.6067]), 26 edges end here
}
