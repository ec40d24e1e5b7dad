package experts

import (
	"errors"
	"testing"
	"time"
)

// TestUnpackFinalWaitsForDecode: when a request fails while another
// request's goroutine is decoding, the record is not reported final (its
// slot would go back and be read into) until that decode stops.
func TestUnpackFinalWaitsForDecode(t *testing.T) {
	const chunk = 4096
	u := &unpackState{length: 3 * chunk, chunk: chunk, landedAt: make([]bool, 3)}
	entered, release := make(chan struct{}), make(chan struct{})
	u.step = func(landed int64) (bool, error) {
		close(entered)
		<-release
		return false, nil
	}
	type result struct {
		final bool
		err   error
	}
	first := make(chan result)
	go func() {
		final, err := u.landed(0, nil) // decodes the first chunk
		first <- result{final, err}
	}()
	<-entered
	cancelled := errors.New("cancelled")
	for _, off := range []int64{chunk, 2 * chunk} {
		if final, _ := u.landed(off, cancelled); final {
			t.Fatalf("request at %d: reported final while a decode is running", off)
		}
	}
	select {
	case r := <-first:
		t.Fatalf("the decoding request returned %+v before its decode stopped", r)
	case <-time.After(10 * time.Millisecond):
	}
	close(release)
	r := <-first
	if !r.final || !errors.Is(r.err, cancelled) {
		t.Fatalf("after the decode: final %v, err %v; want final with the cancellation", r.final, r.err)
	}
	if final, _ := u.landed(0, nil); final {
		t.Fatal("final reported twice")
	}
}
