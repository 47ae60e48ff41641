package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestServeRevalidateWalkNeedsRevalidate: --revalidate-walk with
// --revalidate 0 is a command-line mistake (exit 2): with --revalidate 0
// stores are served as immutable and nothing is checked, so the walk the
// operator asked for never ran, and nothing said so.
func TestServeRevalidateWalkNeedsRevalidate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--revalidate", "0", "--revalidate-walk", "1m", graphStore}, &out, &errs)
	if code != 2 || !strings.Contains(errs.String(), "--revalidate-walk") || !strings.Contains(errs.String(), "--revalidate 0") {
		t.Fatalf("--revalidate 0 --revalidate-walk 1m: exit %d (want 2, naming both): %s", code, errs.String())
	}
}
