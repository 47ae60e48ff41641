package zvf_test

import (
	"os"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

func TestMain(m *testing.M) {
	zvftest.CollectLess()
	os.Exit(m.Run())
}
