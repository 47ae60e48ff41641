package api_test

import (
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

func TestZZObj(t *testing.T) {
	_, ts := newServer(t, api.Options{})
	for _, p := range []string{"/api/v1/stores/points_pyramid/objects/0?level=1", "/api/v1/stores/points_pyramid/objects/0/manifest?level=1", "/api/v1/stores/points_pyramid/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&level=1", "/api/v1/stores/points_pyramid"} {
		t.Logf("%s\n%.3000s", p, apitest.MustGet(t, ts, p))
	}
}
