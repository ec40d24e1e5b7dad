package testmodel

import (
	"testing"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
)

// Open loads the config of the model in dir and opens its container, which
// is closed when the test ends (closing it earlier is allowed).
func Open(t testing.TB, dir string) (*container.Container, *config.Config) {
	t.Helper()
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, cfg
}

// OpenValidated is Open followed by container.Validate, whose summary it
// returns.
func OpenValidated(t testing.TB, dir string) (*container.Container, *config.Config, *container.Summary) {
	t.Helper()
	c, cfg := Open(t, dir)
	sum, err := container.Validate(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg, sum
}
