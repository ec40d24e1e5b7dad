package testmodel

import (
	"testing"

	"github.com/spoolhq/spool/internal/fixtures"
)

func TestOpenValidated(t *testing.T) {
	c, cfg, sum := OpenValidated(t, fixtures.Path(t, "glm52-mini"))
	if len(c.Names()) == 0 || cfg.NumRoutedExperts == 0 || sum.ResidentBytes == 0 {
		t.Fatalf("opened %d tensors, %d routed experts, %d resident bytes", len(c.Names()), cfg.NumRoutedExperts, sum.ResidentBytes)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("closing before the test ends: %v", err)
	}
}
