package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
)

// TestWrapOwnsTheSubject: wrap pins the request's store version before
// the handler runs, so a handler that meets a change is retried through
// the store's handle even if it never asked for the store itself (such a
// handler's change was answered as a bare error, without the handle's
// say), and every call of s.store within one attempt sees that version.
func TestWrapOwnsTheSubject(t *testing.T) {
	t.Parallel()
	st := demoCells(t, demo.Options{Seed: 1, Scale: 1})
	s, err := New(Options{Stores: []*zvf.Store{st}})
	if err != nil {
		t.Fatal(err)
	}
	var seen []*zvf.Store
	r := chi.NewRouter()
	r.Get("/x/{store}", s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		for range 2 {
			got, err := s.store(r)
			if err != nil {
				return err
			}
			seen = append(seen, got)
		}
		return nil
	}))
	r.Get("/changed/{store}", s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return &zvf.Error{Kind: zvf.ErrChanged, Store: st.Name(), Level: -1}
	}))
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/x/"+st.Name(), nil))
	if rec.Code != 200 || len(seen) != 2 || seen[0] != st || seen[1] != st {
		t.Fatalf("%d, versions %v; want the pinned one twice", rec.Code, seen)
	}
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/changed/"+st.Name(), nil))
	var p Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	// The store is served as it is (no watching): its handle says so.
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(p.Detail, "immutable") {
		t.Fatalf("%d %+v: want the handle's answer to a change (503, served as immutable)", rec.Code, p)
	}
}
