package fixturemodel

import (
	"context"
	"sync"
	"testing"

	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/internal/fixtures"
)

// opened holds one *opening per fixture name, for the test binary's life.
var opened sync.Map

type opening struct {
	once sync.Once
	dir  *loader.Dir
	err  error
}

// Shared returns the fixture model name (or the demo model, for
// fixtures.DemoName) loaded with loader.Options{}; the first call in a test
// binary loads it, later calls return the same Dir.
// A missing fixture skips the test (fails it under CI=true), as
// fixtures.Path does.
func Shared(t testing.TB, name string) *loader.Dir {
	t.Helper()
	path := fixtures.ModelDir(t, name)
	v, _ := opened.LoadOrStore(name, &opening{})
	o := v.(*opening)
	o.once.Do(func() { o.dir, o.err = loader.Open(context.Background(), path, loader.Options{}) })
	if o.err != nil {
		t.Fatalf("open %s: %v", name, o.err)
	}
	return o.dir
}
