//go:build vulkan && cgo

package gpu

/*
#include "vk.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/spoolhq/spool/kernels"
)

// MoE applies a mixture-of-experts layer to n rows of x: the router picks
// each row's experts (as the CPU router does: sigmoid scores, bias for
// selection only, ties to the lower id), fetch makes the union of the
// chosen experts ready, each is applied to the rows that chose it, and
// y[r] = shared(x[r]) + sum of the row's weighted expert outputs in
// ascending expert order. It returns the routes. y may be x: x is read
// before y is written. The device scratch holds the rows' inputs, outputs
// and sums, and one group of experts' outputs at a time (not every row's
// every expert's), so n may be a long prompt segment.
func (d *Device) MoE(y, x []float32, n int, l *MoE, fetch Fetch) (Routes, error) {
	if n <= 0 {
		return Routes{}, nil
	}
	if l == nil || l.Router == nil || fetch == nil {
		return Routes{}, errors.New("gpu: MoE without a router or experts")
	}
	E, H, k := l.Router.Rows, l.Router.Cols, l.TopK
	switch {
	case l.Router.Format != kernels.F32:
		return Routes{}, fmt.Errorf("gpu: the router is %s, want f32", l.Router.Format)
	case E > 1024 || k <= 0 || k > 64 || k > E:
		return Routes{}, fmt.Errorf("gpu: routing %d of %d experts (at most 64 of 1024)", k, E)
	case len(l.Bias) != E:
		return Routes{}, fmt.Errorf("gpu: %d bias values for %d experts", len(l.Bias), E)
	}
	if err := checkMatMul(y, l.Router, x, n); err != nil {
		return Routes{}, err
	}
	if l.Shared != nil {
		if err := l.Shared.check(); err != nil {
			return Routes{}, err
		}
		if l.Shared.Gate.Cols != H {
			return Routes{}, fmt.Errorf("gpu: shared expert of width %d on hidden %d", l.Shared.Gate.Cols, H)
		}
	}
	if len(y) < n*H {
		return Routes{}, fmt.Errorf("gpu: MoE output of %d values for %d rows of %d", len(y), n, H)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.timeOp("moe")()
	return d.moe(y, x, n, l, fetch)
}

// expertPlace is where one expert's matrices lie in the bank: byte
// offsets of each matrix's weights and scales.
type expertPlace struct {
	data, scales [3]int64 // gate, up, down
}

func (d *Device) moe(y, x []float32, n int, l *MoE, fetch Fetch) (Routes, error) {
	E, H, k := l.Router.Rows, l.Router.Cols, l.TopK
	o := d.newOp()
	xr := o.input(bytesOf(x[:n*H]))
	router := o.weight(l.Router)
	bias := o.input(bytesOf(l.Bias))
	logits := o.floats(n * E)
	idsR, wtsR := o.scratch(int64(4*n*k)), o.floats(n*k)
	routes := Routes{IDs: make([]int32, n*k), Weights: make([]float32, n*k)}
	idsOut := o.output(idsR, unsafe.Slice((*byte)(unsafe.Pointer(&routes.IDs[0])), 4*n*k))
	wtsOut := o.output(wtsR, bytesOf(routes.Weights))
	outR := o.floats(n * H)
	yOut := o.output(outR, bytesOf(y[:n*H]))
	var shared func(binding) error
	if l.Shared != nil {
		var err error
		if shared, err = o.mlp(l.Shared, n, xr); err != nil {
			return Routes{}, err
		}
	}
	// Each row's sum of its weighted expert outputs, and one group's
	// outputs: at most maxPairs (row, slot) pairs, at least every row
	// (one expert may serve them all).
	accR := o.floats(n * H)
	pairs := n * k
	maxPairs := min(pairs, max(n, (pairs+groupShare-1)/groupShare))
	sets := o.groupSets(min(E, pairs), maxPairs)
	eoR := o.floats(maxPairs * H)

	if err := o.begin(); err != nil {
		return Routes{}, err
	}
	if err := o.gemm(gemm{w: router, M: E, K: H, N: n, x: o.bind(xr), xLd: H, y: o.bind(logits), yLd: E}); err != nil {
		return Routes{}, err
	}
	if err := o.barrier(); err != nil {
		return Routes{}, err
	}
	gx, gy := grid2(n)
	push := []uint32{uint32(E), uint32(k), b2u(l.Normalize), f32bits(l.Scale)}
	if err := o.dispatch(shRoute, nil, []binding{o.bind(logits), o.bind(bias), o.bind(idsR), o.bind(wtsR)}, push, gx, gy, 1); err != nil {
		return Routes{}, err
	}
	if shared != nil {
		if err := shared(o.bind(outR)); err != nil {
			return Routes{}, err
		}
	} else if rc := C.spool_vk_fill(d.v, d.work.b, C.uint64_t(outR.off), C.uint64_t(outR.size), 0); rc != 0 {
		return Routes{}, d.lastError("fill", rc)
	}
	if rc := C.spool_vk_fill(d.v, d.work.b, C.uint64_t(accR.off), C.uint64_t(accR.size), 0); rc != 0 {
		return Routes{}, d.lastError("fill", rc)
	}
	if err := o.barrier(); err != nil {
		return Routes{}, err
	}
	if err := o.finish(idsOut, wtsOut); err != nil {
		return Routes{}, err
	}

	// users[e]: the (row, slot) pairs that chose expert e, row-major.
	users := map[int][]int32{}
	for p, e := range routes.IDs {
		if e < 0 || int(e) >= E {
			return Routes{}, fmt.Errorf("gpu: the router chose expert %d of %d", e, E)
		}
		users[int(e)] = append(users[int(e)], int32(p))
	}
	union := make([]int, 0, len(users))
	for e := range users {
		union = append(union, e)
	}
	slices.Sort(union)
	delivery, err := fetch(union)
	if err != nil {
		return Routes{}, err
	}
	defer delivery.Release()
	d.resident.noteUses(l, union)
	g := &groups{o: o, layer: l, union: union, users: users, weights: routes.Weights, k: k, H: H, xr: xr, eoR: eoR, accR: accR, sets: sets, maxPairs: maxPairs}
	if err := g.apply(delivery); err != nil {
		return Routes{}, err
	}
	// y = the sums + the shared expert's output (or zeros).
	if err := o.barrier(); err != nil {
		return Routes{}, err
	}
	gx, gy = grid2((n*H + 255) / 256)
	if err := o.dispatch(shAdd, nil, []binding{o.bind(outR), o.bind(accR)}, []uint32{uint32(n * H)}, gx, gy, 1); err != nil {
		return Routes{}, err
	}
	if err := o.barrier(); err != nil {
		return Routes{}, err
	}
	if err := o.finish(yOut); err != nil {
		return Routes{}, err
	}
	return routes, nil
}

// checkExpert checks e and, unless it is the first, that it matches the
// batch's first expert in format and shape.
func checkExpert(e, first *MLP, isFirst bool, H int) error {
	if err := e.check(); err != nil {
		return err
	}
	if e.Gate.Cols != H {
		return fmt.Errorf("gpu: expert of width %d on hidden %d", e.Gate.Cols, H)
	}
	if isFirst {
		return nil
	}
	for j, m := range []*kernels.Matrix{e.Gate, e.Up, e.Down} {
		f := []*kernels.Matrix{first.Gate, first.Up, first.Down}[j]
		if m.Format != f.Format || m.Rows != f.Rows || m.Cols != f.Cols || m.GroupSize != f.GroupSize {
			return errors.New("gpu: the experts of one layer differ in format or shape")
		}
	}
	return nil
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func u32bytes(u []uint32) []byte {
	if len(u) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&u[0])), 4*len(u))
}

// growWork grows the work buffer to the current layout, keeping its
// contents (a device copy from the old buffer).
func (o *op) growWork() error {
	d := o.d
	if d.work.size >= o.work {
		return nil
	}
	if err := o.submit(); err != nil {
		return err
	}
	old := d.work
	d.work = nil
	nb, err := d.ensure(&d.work, o.work, C.SPOOL_MEM_DEVICE)
	if err != nil {
		d.work = old
		return err
	}
	if rc := C.spool_vk_copy(d.v, old.b, 0, nb.b, 0, C.uint64_t(old.size)); rc != 0 {
		return d.lastError("copy", rc)
	}
	if err := o.submit(); err != nil {
		return err
	}
	d.freeBuffer(old)
	return nil
}
