package zvfserve_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/zvfserve/zvfserve"
)

// TestOpenAPIEmbedded: the document the server embeds is the one at the
// repository root.
func TestOpenAPIEmbedded(t *testing.T) {
	b, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(zvfserve.OpenAPI(), b) || !bytes.HasPrefix(b, []byte("openapi: 3.")) {
		t.Fatalf("embedded %d bytes, openapi.yaml has %d", len(zvfserve.OpenAPI()), len(b))
	}
}
