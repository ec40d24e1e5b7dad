package experts

import (
	"errors"
	"testing"

	"github.com/spoolhq/spool/engine/rans"
)

// TestUnpackFinalWaitsForDecode: when a request fails while a decode
// helper of the record has yet to stop, the record is not reported final
// (its slot would go back and be read into) until that helper stops; the
// outcome is then the failure, reported once.
func TestUnpackFinalWaitsForDecode(t *testing.T) {
	const chunk = 4096
	var helpers []func()
	var reports []error
	lo := &layout{reads: []extentRead{{n: 3 * chunk}}, packed: &packedLayout{}}
	u := newUnpackState(lo, make([]byte, 4*chunk), chunk, rans.Loop{}, nil,
		func(run func()) { helpers = append(helpers, run) }, 2, func(err error) { reports = append(reports, err) })
	u.landed(0, nil) // the first chunk: a helper to parse the header
	if len(helpers) != 1 {
		t.Fatalf("%d helpers started for the header, want 1", len(helpers))
	}
	cancelled := errors.New("cancelled")
	for _, off := range []int64{chunk, 2 * chunk} {
		u.landed(off, cancelled)
	}
	if len(reports) != 0 {
		t.Fatalf("reported %v while a helper had yet to stop", reports)
	}
	helpers[0]() // finds no record there (zeros), and stops
	if len(reports) != 1 || !errors.Is(reports[0], cancelled) {
		t.Fatalf("after the helper: reports %v, want the cancellation once", reports)
	}
	u.landed(0, nil)
	if len(reports) != 1 {
		t.Fatal("final reported twice")
	}
}
