package experts

import (
	"context"

	"github.com/spoolhq/spool/kernels"
)

// Expert is one routed expert's three matrices: down(silu(gate x) * up x).
type Expert struct {
	Gate, Up, Down *kernels.Matrix
}

// Source hands out routed experts.
type Source interface {
	// Acquire starts making experts ids (unique) of layer ready. Layer is the
	// decoder layer index; the MTP layer is config.NumLayers.
	Acquire(ctx context.Context, layer int, ids []int) (Lease, error)
}

// Lease delivers the experts of one Acquire, each exactly once, in the order
// they become ready (resident experts first). The model computes each
// expert's output as it arrives and sums them in a fixed order afterwards, so
// results do not depend on arrival order.
type Lease interface {
	// Next blocks until another expert is ready and returns its index in the
	// ids passed to Acquire. It returns io.EOF after the last one.
	Next(ctx context.Context) (index int, e *Expert, err error)
	// Done says the consumer no longer reads expert index: its memory may be
	// reused (a streamed source recycles the slot for a later miss of the
	// same lease). Calling Done is optional; Release implies it.
	Done(index int)
	// Release ends the lease; the experts' memory may be reused afterwards.
	Release()
	// Cost says what the lease read from storage for its experts; it is
	// final once Release returned. Each lease reports its own, so that a
	// forward's cost is the sum of its leases' whatever else runs: other
	// forwards, read-aheads.
	Cost() Cost
}

// Prefetcher is a Source that can read experts ahead of their Acquire.
type Prefetcher interface {
	// Prefetch says that layer will probably soon Acquire ids: a source
	// may start reading them into spare memory, behind every read an
	// Acquire is waiting for. It returns at once and never changes what
	// an Acquire delivers.
	Prefetch(ctx context.Context, layer int, ids []int)
	// Prefetching reports whether Prefetch does anything, so that
	// callers skip computing hints nobody reads.
	Prefetching() bool
	// Order says in which order the coming Acquire of layer wants its
	// experts read, most wanted first (those the most rows route to).
	Order(layer int, ids []int)
}
