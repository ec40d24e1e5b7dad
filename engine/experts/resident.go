package experts

import (
	"context"
	"fmt"
	"io"
)

// Loader reads one routed expert into memory.
type Loader interface {
	LoadExpert(layer, expert int) (*Expert, error)
}

// Resident keeps every routed expert of the model in memory. It is the plain
// path that streamed tiers are checked against.
type Resident struct {
	experts map[int][]*Expert // layer -> expert id -> expert
}

// LoadResident reads every expert of the given layers through l.
func LoadResident(ctx context.Context, l Loader, layers []int, numExperts int) (*Resident, error) {
	r := &Resident{experts: make(map[int][]*Expert, len(layers))}
	for _, layer := range layers {
		row := make([]*Expert, numExperts)
		for e := range row {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			x, err := l.LoadExpert(layer, e)
			if err != nil {
				return nil, fmt.Errorf("experts: layer %d expert %d: %w", layer, e, err)
			}
			row[e] = x
		}
		r.experts[layer] = row
	}
	return r, nil
}

// Acquire implements Source.
func (r *Resident) Acquire(_ context.Context, layer int, ids []int) (Lease, error) {
	row, ok := r.experts[layer]
	if !ok {
		return nil, fmt.Errorf("experts: layer %d has no routed experts", layer)
	}
	out := make([]*Expert, len(ids))
	for i, id := range ids {
		if id < 0 || id >= len(row) {
			return nil, fmt.Errorf("experts: layer %d has no expert %d", layer, id)
		}
		out[i] = row[id]
	}
	return &residentLease{experts: out}, nil
}

type residentLease struct {
	experts []*Expert
	next    int
}

func (l *residentLease) Next(ctx context.Context) (int, *Expert, error) {
	if l.next >= len(l.experts) {
		return 0, nil, io.EOF
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	i := l.next
	l.next++
	return i, l.experts[i], nil
}

func (l *residentLease) Done(int) {}

func (l *residentLease) Release() {}

// Cost implements Lease: nothing is read from storage.
func (l *residentLease) Cost() Cost { return Cost{} }
