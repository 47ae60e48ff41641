package writer

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves goroutines behind (the
// write pool and the zstd encoders must be shut down on every path).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
