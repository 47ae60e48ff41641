package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The viewer's selection (filter box, sample slider) and density
// overview, checked against the server's own answers to the same
// question: a count or a density with the same filter and sample.

// layerBox is the layer's bounds as the page holds them, as min= and max=.
func layerBox(t *testing.T, b *browser, name string) (lo, hi string) {
	t.Helper()
	var box [2][3]float64
	b.value(`__zvf.layers().find(l => l.name === `+jsString(name)+`).bounds`, &box)
	join := func(c [3]float64) string {
		s := make([]string, 3)
		for i, v := range c {
			s[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		return strings.Join(s, ",")
	}
	return join(box[0]), join(box[1])
}

// apiGet decodes the JSON the server answers for path (relative to the
// server's root) into out and returns the status.
func apiGet(t *testing.T, e *viewerEnv, path string, out any) int {
	t.Helper()
	r, err := http.Get(e.ts.URL + "/" + strings.TrimPrefix(path, "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Body.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := json.NewDecoder(r.Body).Decode(out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r.StatusCode
}

// serverCount is the server's count of the layer's rows at level 0 over
// its bounds with the query's extra parameters (filter=…, sample=…).
func serverCount(t *testing.T, e *viewerEnv, b *browser, name, extra string) int {
	t.Helper()
	lo, hi := layerBox(t, b, name)
	var c struct{ Count int }
	if st := apiGet(t, e, "api/v1/stores/"+name+"/count?min="+lo+"&max="+hi+"&level=0"+extra, &c); st != http.StatusOK {
		t.Fatalf("count %s %s: status %d", name, extra, st)
	}
	return c.Count
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// setInput sets a layer card's control and fires its change event.
func setInput(b *browser, store, class, value string) {
	b.eval(`(() => { const e = document.querySelector('.layer[data-store=` + jsString(store) + `] .` + class + `'); e.value = ` + jsString(value) + `; e.dispatchEvent(new Event('change')); })()`)
}

// unselect sets the layer's control class back to value, no selection:
// the page then draws all of the layer's level 0 and the URL no longer
// holds param.
func unselect(t *testing.T, b *browser, store, class, value, param string, all int) {
	t.Helper()
	setInput(b, store, class, value)
	b.settle()
	if got := drawnAt0(t, b, store); got != all {
		t.Errorf("with %s %q the page drew %d %s vertices; want all %d", class, value, got, store, all)
	}
	if loc := b.search(); strings.Contains(loc, param) {
		t.Errorf("with %s %q the URL %q still holds %s", class, value, loc, param)
	}
}

// drawnAt0 is what the page draws of the layer, failing unless it is all
// level 0.
func drawnAt0(t *testing.T, b *browser, name string) int {
	t.Helper()
	levels := b.drawnLevels()
	if len(levels[name]) != 1 || levels[name]["0"] == 0 {
		t.Fatalf("%s drawn at levels %v; want level 0 alone", name, levels[name])
	}
	return levels[name]["0"]
}

// tileSelections: the filter= and sample= of every tile (and seam)
// request of store the server saw in log.
func tileSelections(t *testing.T, log []served, store string) (filters, samples map[string]int) {
	t.Helper()
	filters, samples = map[string]int{}, map[string]int{}
	for _, s := range log {
		u, err := url.Parse(s.uri)
		if err != nil {
			t.Fatal(err)
		}
		if route(u.Path) != "/api/v1/stores/"+store+"/bbox" {
			continue
		}
		filters[u.Query().Get("filter")]++
		samples[u.Query().Get("sample")]++
	}
	return filters, samples
}

const neuronsAndAstrocytes = "cell_type IN ('neuron', 'astrocyte')"

// testFilter: a filter typed in the cells' box draws exactly the rows the
// server's count with that filter finds (at level 0: the coarse levels
// have no cell_type), every tile asks with it, the hints list the
// queryables, and clearing it draws every cell again.
func testFilter(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells&c.cells=cell_type")
	all := drawnAt0(t, b, "cells")
	if all != e.level0["cells"] {
		t.Fatalf("unfiltered, the page drew %d cells; want all %d", all, e.level0["cells"])
	}
	// The hints: the store's queryables, with the categories' labels.
	b.eval(`document.querySelector('.layer[data-store="cells"] .filter').dispatchEvent(new Event('focus'))`)
	b.wait(`document.querySelector('.layer[data-store="cells"] .fhint').textContent !== ''`)
	hint := b.text(`.layer[data-store="cells"] .fhint`)
	var q struct {
		Properties map[string]struct{ Enum []string }
	}
	apiGet(t, e, "api/v1/stores/cells/queryables", &q)
	if len(q.Properties) == 0 {
		t.Fatal("the cells store has no queryables")
	}
	for name, p := range q.Properties {
		if !strings.Contains(hint, name) {
			t.Errorf("hint %q lacks the queryable %q", hint, name)
		}
		for _, v := range p.Enum {
			if !strings.Contains(hint, v) {
				t.Errorf("hint %q lacks %s's label %q", hint, name, v)
			}
		}
	}
	var options []string
	b.value(`[...document.querySelectorAll('.layer[data-store="cells"] datalist option')].map(o => o.value)`, &options)
	if !slices.Contains(options, "cell_type = 'neuron'") {
		t.Errorf("the filter box offers %q; want cell_type = 'neuron' among them", options)
	}

	start := e.lg.len()
	setInput(b, "cells", "filter", neuronsAndAstrocytes)
	b.settle()
	want := serverCount(t, e, b, "cells", "&filter="+url.QueryEscape(neuronsAndAstrocytes))
	if want == 0 || want >= all {
		t.Fatalf("the server counts %d of %d cells for %q; the test wants a filter that keeps some", want, all, neuronsAndAstrocytes)
	}
	if got := drawnAt0(t, b, "cells"); got != want {
		t.Errorf("filtered by %q the page drew %d cells; the server counts %d", neuronsAndAstrocytes, got, want)
	}
	filters, _ := tileSelections(t, e.lg.since(start), "cells")
	if len(filters) != 1 || filters[neuronsAndAstrocytes] == 0 {
		t.Errorf("tile requests after the filter carried filters %v; want every one %q", filters, neuronsAndAstrocytes)
	}
	loc := b.search()
	if v, _ := url.ParseQuery(strings.TrimPrefix(loc, "?")); v.Get("f.cells") != neuronsAndAstrocytes {
		t.Errorf("URL %q does not hold the filter", loc)
	}
	if e := b.text(`.layer[data-store="cells"] .lerr`); e != "" {
		t.Errorf("an error next to the filtered layer: %q", e)
	}
	b.page("viewer-filter.png")

	// Cleared: every cell again, the URL without it.
	unselect(t, b, "cells", "filter", "", "f.cells", all)
	b.noProblems()
}

// testFilterExample: each layer's filter box shows an example on that
// store's own attributes. Every box said "e.g. cell_type = 'neuron'", which
// the axons, skeletons and meshes stores refuse (they have no cell_type).
func testFilterExample(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,axons")
	want := map[string]string{
		"cells": "filter (CQL2), e.g. cell_type = 'astrocyte'",
		"axons": "filter (CQL2), e.g. fa > 0",
	}
	for name, w := range want {
		js := fmt.Sprintf(`document.querySelector('.layer[data-store=%q] .filter').placeholder`, name)
		b.wait(fmt.Sprintf(`(%s) === %q`, js, w))
	}
}

// testBadFilter: a filter the server refuses shows its problem's detail
// next to the layer, asks for no tiles and leaves the drawing as it was.
func testBadFilter(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,axons&f.cells="+url.QueryEscape("cell_type = 'neuron'"))
	before := drawnAt0(t, b, "cells")
	if want := serverCount(t, e, b, "cells", "&filter="+url.QueryEscape("cell_type = 'neuron'")); before != want {
		t.Fatalf("filtered by cell_type = 'neuron' the page drew %d cells; the server counts %d", before, want)
	}
	for _, bad := range []string{"cell_type =", "volume > 2"} {
		lo, hi := layerBox(t, b, "cells")
		var problem struct{ Type, Detail string }
		if st := apiGet(t, e, "api/v1/stores/cells/count?min="+lo+"&max="+hi+"&level=0&filter="+url.QueryEscape(bad), &problem); st != http.StatusBadRequest || problem.Detail == "" {
			t.Fatalf("the server answers %q with %d %+v; the test wants a refused filter", bad, st, problem)
		}
		start := e.lg.len()
		setInput(b, "cells", "filter", bad)
		b.wait(`document.querySelector('.layer[data-store="cells"] .lerr').textContent !== ''`)
		b.settle()
		if got := b.text(`.layer[data-store="cells"] .lerr`); !strings.Contains(got, problem.Detail) {
			t.Errorf("filter %q: the layer's error line says %q; want the server's detail %q", bad, got, problem.Detail)
		}
		if got := drawnAt0(t, b, "cells"); got != before {
			t.Errorf("filter %q: the page drew %d cells; want the %d drawn before", bad, got, before)
		}
		if filters, _ := tileSelections(t, e.lg.since(start), "cells"); len(filters) != 0 {
			t.Errorf("filter %q: the page asked for tiles with filters %v", bad, filters)
		}
		loc := b.search()
		if v, _ := url.ParseQuery(strings.TrimPrefix(loc, "?")); v.Get("f.cells") != "cell_type = 'neuron'" {
			t.Errorf("filter %q: URL %q; want the filter in use", bad, loc)
		}
		if got := b.text(`.layer[data-store="axons"] .lerr`); got != "" {
			t.Errorf("another layer shows an error: %q", got)
		}
	}
	b.page("viewer-bad-filter.png")
	// Back to the filter in use: the error goes.
	setInput(b, "cells", "filter", "cell_type = 'neuron'")
	b.wait(`document.querySelector('.layer[data-store="cells"] .lerr').textContent === ''`)
	b.noProblems()

	// A layer fixed at a level that lacks the filter's attribute refuses
	// it with that level's reason (other levels taking it do not help).
	b = e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=cells&lvl.cells=1")
	b.settle()
	levels := b.drawnLevels()
	before = levels["cells"]["1"]
	lo, hi := layerBox(t, b, "cells")
	var problem struct{ Detail string }
	if st := apiGet(t, e, "api/v1/stores/cells/count?min="+lo+"&max="+hi+"&level=1&filter="+url.QueryEscape("cell_type = 'neuron'"), &problem); st != http.StatusBadRequest {
		t.Fatalf("level 1 takes cell_type = 'neuron' (%d); the test wants a level without cell_type", st)
	}
	start := e.lg.len()
	setInput(b, "cells", "filter", "cell_type = 'neuron'")
	b.wait(`document.querySelector('.layer[data-store="cells"] .lerr').textContent !== ''`)
	b.settle()
	if got := b.text(`.layer[data-store="cells"] .lerr`); !strings.Contains(got, problem.Detail) {
		t.Errorf("at level 1 the layer's error line says %q; want %q", got, problem.Detail)
	}
	levels = b.drawnLevels()
	if len(levels["cells"]) != 1 || levels["cells"]["1"] != before || before == 0 {
		t.Errorf("at level 1 with a refused filter the page drew %v; want the %d level-1 vertices it drew", levels["cells"], before)
	}
	if filters, _ := tileSelections(t, e.lg.since(start), "cells"); len(filters) != 0 {
		t.Errorf("at level 1 the page asked for tiles with filters %v", filters)
	}
	b.noProblems()
}

// testSampleSlider: the axons' slider draws what sample=F answers; points
// have no slider.
func testSampleSlider(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=axons,cells")
	var hidden map[string]bool
	b.value(`({axons: document.querySelector('.layer[data-store="axons"] .lsample').hidden, cells: document.querySelector('.layer[data-store="cells"] .lsample').hidden})`, &hidden)
	if hidden["axons"] || !hidden["cells"] {
		t.Errorf("sample slider hidden: %v; want one for the streamlines and none for the points", hidden)
	}
	all := drawnAt0(t, b, "axons")
	start := e.lg.len()
	setInput(b, "axons", "sample", "0.3")
	b.settle()
	want := serverCount(t, e, b, "axons", "&sample=0.3")
	if want == 0 || want >= all {
		t.Fatalf("the server counts %d of %d axon vertices at sample=0.3", want, all)
	}
	if got := drawnAt0(t, b, "axons"); got != want {
		t.Errorf("at sample 0.3 the page drew %d axon vertices; the server counts %d", got, want)
	}
	if _, samples := tileSelections(t, e.lg.since(start), "axons"); len(samples) != 1 || samples["0.3"] == 0 {
		t.Errorf("tile requests after the slider carried samples %v; want every one 0.3", samples)
	}
	loc := b.search()
	if !strings.Contains(loc, "s.axons=0.3") || strings.Contains(loc, "s.cells") {
		t.Errorf("URL %q; want s.axons=0.3 alone", loc)
	}
	if out := b.text(`.layer[data-store="axons"] .sampleval`); out != "30 %" {
		t.Errorf("the slider reads %q; want 30 %%", out)
	}
	b.page("viewer-sample.png")
	// Back at 1: every vertex again, no s.axons in the URL.
	unselect(t, b, "axons", "sample", "1", "s.axons", all)
	b.noProblems()
}

// testSelectionURL: a link with a filter and a sample opens them (box,
// slider, drawing); a link with a filter the server refuses shows why and
// draws the layer unfiltered.
func testSelectionURL(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,axons&f.cells="+url.QueryEscape(neuronsAndAstrocytes)+"&s.axons=0.25")
	if got, want := drawnAt0(t, b, "cells"), serverCount(t, e, b, "cells", "&filter="+url.QueryEscape(neuronsAndAstrocytes)); got != want {
		t.Errorf("cells from the URL's filter: drew %d; the server counts %d", got, want)
	}
	if got, want := drawnAt0(t, b, "axons"), serverCount(t, e, b, "axons", "&sample=0.25"); got != want {
		t.Errorf("axons from the URL's sample: drew %d; the server counts %d", got, want)
	}
	var ctl struct{ Filter, Sample string }
	b.value(`({filter: document.querySelector('.layer[data-store="cells"] .filter').value, sample: document.querySelector('.layer[data-store="axons"] .sample').value})`, &ctl)
	if ctl.Filter != neuronsAndAstrocytes || ctl.Sample != "0.25" {
		t.Errorf("controls from the URL: %+v", ctl)
	}
	// The page writes back what it read.
	loc := b.search()
	v, _ := url.ParseQuery(strings.TrimPrefix(loc, "?"))
	if v.Get("f.cells") != neuronsAndAstrocytes || v.Get("s.axons") != "0.25" {
		t.Errorf("URL written back %q", loc)
	}
	// A refused filter in a link: the reason shows, every cell is drawn.
	b.navigate(e.ts.URL + "/?stores=cells&f.cells=" + url.QueryEscape("cell_type ="))
	b.settle()
	if got := drawnAt0(t, b, "cells"); got != e.level0["cells"] {
		t.Errorf("with a refused filter in the URL the page drew %d cells; want all %d", got, e.level0["cells"])
	}
	if got := b.text(`.layer[data-store="cells"] .lerr`); !strings.HasPrefix(got, "filter: ") {
		t.Errorf("the layer's error line says %q; want the refused filter's reason", got)
	}
	b.noProblems()
}

// testDensityOverview: a layer the budget holds back gets a density
// overview of its box in view, one disc per cell the server's density
// counts; under a budget that fits it, none.
func testDensityOverview(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells&budget=1000")
	var ov map[string]struct {
		URL      string
		Level    int
		Min, Max []float64
		Shape    []int
		Cells    int
		Total    int
	}
	b.value(`__zvf.overview()`, &ov)
	o, ok := ov["cells"]
	if !ok {
		t.Fatalf("no density overview under a 1,000 budget: %v", ov)
	}
	var drawn map[string]int
	b.value(`__zvf.drawn`, &drawn)
	if drawn["cells"] >= e.level0["cells"] {
		t.Fatalf("drew %d cells under a 1,000 budget", drawn["cells"])
	}
	// The overview asked for the layer's box (the whole of it is in view),
	// at level 0, and drew each non-empty cell of the server's answer.
	lo, hi := layerBox(t, b, "cells")
	u, err := url.Parse(o.URL)
	if err != nil {
		t.Fatal(err)
	}
	if q := u.Query(); q.Get("min") != lo || q.Get("max") != hi || q.Get("level") != "0" || q.Get("shape") != "32,32,32" {
		t.Errorf("overview asked for %q; want the layer's box %s..%s at level 0 in 32³ cells", o.URL, lo, hi)
	}
	var d struct {
		Shape  []int
		Counts []int64
	}
	if st := apiGet(t, e, o.URL, &d); st != http.StatusOK {
		t.Fatalf("%s: status %d", o.URL, st)
	}
	nonZero, total := 0, 0
	for _, c := range d.Counts {
		if c > 0 {
			nonZero++
			total += int(c)
		}
	}
	if o.Cells != nonZero || o.Total != total || total != e.level0["cells"] {
		t.Errorf("overview of %d cells, %d vertices; the server's density has %d non-empty cells, %d vertices (the store %d)", o.Cells, o.Total, nonZero, total, e.level0["cells"])
	}
	if s := b.text(`.layer[data-store="cells"] .lstat`); !strings.Contains(s, "density overview") || !strings.Contains(s, "budget") {
		t.Errorf("the layer's status %q does not say it shows an overview, and why", s)
	}
	var cover map[string]int
	b.value(`__zvf.coverage()`, &cover)
	if cover["cells"] < 5000 {
		t.Errorf("the overview and %d cells cover %d pixels", drawn["cells"], cover["cells"])
	}
	b.shot("viewer-density-overview.png")
	// A budget that fits the layer: no overview, nothing said of one.
	b.eval(`(() => { const e = document.getElementById('budget'); e.value = '1000000'; e.dispatchEvent(new Event('change')); })()`)
	b.settle()
	b.value(`__zvf.overview()`, &ov)
	if len(ov) != 0 || strings.Contains(b.text(`.layer[data-store="cells"] .lstat`), "overview") {
		t.Errorf("under a budget that fits, overviews %v", ov)
	}
	b.noProblems()
}
