package experts

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// RouteTrace records what a source was asked for, in order: one step per
// Acquire, the layer and the unique expert ids of every row of that
// forward. It is what a cache policy sees, so replaying a trace through a
// source (Replay) reproduces the policy's hits and reads exactly.
//
// Text form (Encode): a header line "spool-route-trace 1 <layers>
// <experts>", then one line per step, "<layer> <id> <id> ...". The tests
// read traces back (and Colibri's ROUTE_TRACE lines) and replay them
// through the tier and through policies alone (replay_export_test.go).
type RouteTrace struct {
	// Layers and Experts give the model's shape: decoder layers (the MTP
	// layer is number Layers) and routed experts per layer.
	Layers, Experts int
	Steps           []RouteStep

	mu sync.Mutex
}

// RouteStep is one Acquire: a layer and its unique expert ids, ascending.
type RouteStep struct {
	Layer int
	IDs   []int
}

// record appends a step (a copy of ids, sorted).
func (t *RouteTrace) record(layer int, ids []int) {
	s := RouteStep{Layer: layer, IDs: slices.Clone(ids)}
	slices.Sort(s.IDs)
	t.mu.Lock()
	t.Steps = append(t.Steps, s)
	t.mu.Unlock()
}

// Encode renders the trace in its text form.
func (t *RouteTrace) Encode() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, "spool-route-trace 1 %d %d\n", t.Layers, t.Experts)
	for _, s := range t.Steps {
		b.WriteString(strconv.Itoa(s.Layer))
		for _, id := range s.IDs {
			b.WriteByte(' ')
			b.WriteString(strconv.Itoa(id))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}
