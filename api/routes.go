package api

import (
	"net/http"
	"strings"
)

// storeRoutes is the prefix of the routes about one store.
const storeRoutes = "/api/v1/stores/{store}"

// apiRoute is one route of the data API. The table of them is the one
// place a route is declared: routes() mounts it, checkParams checks each
// request's query against its parameters, and a test holds openapi.yaml
// to both.
type apiRoute struct {
	pattern string // the full path pattern, as openapi.yaml writes it
	handle  func(*Server, http.ResponseWriter, *http.Request) error
	params  []paramSpec
}

func apiRoutes() []apiRoute {
	const st = storeRoutes
	fJSON := paramSpec{name: "f", values: []string{"json"}}
	fPayload := paramSpec{name: "f", values: formatNames(payloadCodecs(nil))}
	fAnswer := paramSpec{name: "f", values: formatNames(answerCodecs(nil))}
	fDensity := paramSpec{name: "f", values: formatNames(densityCodecs(nil))}
	pTable := paramSpec{name: "table", values: []string{tableVertices, tableEdges, tableFaces}}
	pLevel, pAttrs, pPrec := paramSpec{name: "level"}, paramSpec{name: "attributes"}, paramSpec{name: "precision"}
	pMin, pMax := paramSpec{name: "min"}, paramSpec{name: "max"}
	pFilter, pLang, pSample := paramSpec{name: "filter"}, paramSpec{name: "filter-lang", values: []string{"cql2-text", "cql2-json"}}, paramSpec{name: "sample"}
	pConn := paramSpec{name: "connectivity", values: []string{"true", "false"}}
	pEdgeAttrs := paramSpec{name: "edge_attributes"}
	// A chunk's links are its edges (or faces, which its Arrow answer
	// does not tabulate: table=faces is the bbox and object routes').
	pChunkTable := paramSpec{name: "table", values: []string{tableVertices, tableEdges}}
	data := []apiRoute{
		{st + "/bbox", (*Server).bbox, []paramSpec{pMin, pMax, pLevel, pAttrs, pEdgeAttrs, {name: "limit"}, {name: "cursor"}, pConn, pFilter, pLang, pSample, fAnswer, pTable, pPrec}},
		{st + "/count", (*Server).count, []paramSpec{pMin, pMax, pLevel, pFilter, pLang, pSample, fJSON}},
		{st + "/density", (*Server).density, []paramSpec{pMin, pMax, pLevel, {name: "shape"}, pFilter, pLang, pSample, fDensity}},
		{st + "/queryables", (*Server).queryables, []paramSpec{pLevel, fJSON}},
		{st + "/objects/{id}", (*Server).object, []paramSpec{pLevel, pAttrs, pEdgeAttrs, fAnswer, pTable, pPrec}},
		{st + "/objects/{id}/manifest", (*Server).manifest, []paramSpec{pLevel, fJSON}},
		{st + "/objects/{id}/levels", (*Server).objectLevels, []paramSpec{fJSON}},
		{st + "/groups/{id}", (*Server).group, []paramSpec{pLevel, fJSON}},
		{st + "/levels/{level}/chunks", (*Server).chunks, []paramSpec{fJSON}},
		{st + "/levels/{level}/chunks/{key}", (*Server).chunk, []paramSpec{pAttrs, pEdgeAttrs, fPayload, pChunkTable, pPrec}},
	}
	routes := []apiRoute{
		{"/api/v1/stores", (*Server).listStores, []paramSpec{fJSON}},
		{st, (*Server).describeStore, []paramSpec{fJSON}},
	}
	routes = append(routes, data...)
	// Each data route also answers under the store version the descriptor
	// names (versioned.go).
	for _, rt := range data {
		routes = append(routes, apiRoute{versionedRoutes + strings.TrimPrefix(rt.pattern, st), atVersion(rt.handle), rt.params})
	}
	return routes
}
