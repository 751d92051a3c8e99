package metrics

import (
	"testing"

	"go.uber.org/goleak"
)

// No test may leave a goroutine behind (servers, exporters and collectors are all closed).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
