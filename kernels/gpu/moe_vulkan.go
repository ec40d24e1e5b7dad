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
// ascending expert order. It returns the routes.
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
	// The experts' scratch is sized for the worst case, n*k (row, slot)
	// pairs, so that one layout serves every batch of experts.
	pairs := n * k
	maxZ := min(E, pairs)
	tables := make([]uint32, 3*4*maxZ)
	lists := make([]uint32, 2*pairs) // rows in, then (row, slot) out
	combine := make([]uint32, 2*pairs)
	tablesT, listsT, combineT := o.later(u32bytes(tables)), o.later(u32bytes(lists)), o.later(u32bytes(combine))

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
	experts, release, err := fetch(union)
	if err != nil {
		return Routes{}, err
	}
	defer release()
	if len(experts) != len(union) {
		return Routes{}, fmt.Errorf("gpu: fetched %d experts of %d", len(experts), len(union))
	}
	if err := checkExperts(experts, H); err != nil {
		return Routes{}, err
	}
	eoR, hR, uR := o.floats(pairs*H), o.floats(pairs*experts[0].Gate.Rows), o.floats(pairs*experts[0].Gate.Rows)
	// The expert scratch was not in the layout begin sized: grow the work
	// buffer now if needed, keeping what phase one left in it.
	if err := o.growWork(); err != nil {
		return Routes{}, err
	}
	for lo := 0; lo < len(union); {
		hi, err := d.loadBank(experts, lo)
		if err != nil {
			return Routes{}, err
		}
		if err := o.expertBatch(experts[lo:hi], union[lo:hi], users, k, H, xr, hR, uR, eoR, tables, lists, tablesT, listsT); err != nil {
			return Routes{}, err
		}
		lo = hi
	}

	// Combine: per row, the k slots in ascending expert order.
	perm, wperm := combine[:pairs], unsafe.Slice((*float32)(unsafe.Pointer(&combine[pairs])), pairs)
	order := make([]int, k)
	for r := 0; r < n; r++ {
		for j := range order {
			order[j] = j
		}
		ids := routes.IDs[r*k : (r+1)*k]
		slices.SortFunc(order, func(a, b int) int { return int(ids[a]) - int(ids[b]) })
		for j, s := range order {
			perm[r*k+j] = uint32(s)
			wperm[r*k+j] = routes.Weights[r*k+s]
		}
	}
	if err := o.stage(combineT); err != nil {
		return Routes{}, err
	}
	cr := combineT.region()
	permB := binding{d.work, cr.off, int64(4 * pairs)}
	wB := binding{d.work, cr.off + int64(4*pairs), int64(4 * pairs)}
	if err := o.dispatch(shCombine, nil, []binding{o.bind(outR), o.bind(eoR), permB, wB}, []uint32{uint32(n), uint32(H), uint32(k)}, (H+255)/256, n, 1); err != nil {
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

func checkExperts(experts []MLP, H int) error {
	first := experts[0]
	for i := range experts {
		e := &experts[i]
		if err := e.check(); err != nil {
			return err
		}
		if e.Gate.Cols != H {
			return fmt.Errorf("gpu: expert of width %d on hidden %d", e.Gate.Cols, H)
		}
		for j, m := range []*kernels.Matrix{e.Gate, e.Up, e.Down} {
			f := []*kernels.Matrix{first.Gate, first.Up, first.Down}[j]
			if m.Format != f.Format || m.Rows != f.Rows || m.Cols != f.Cols || m.GroupSize != f.GroupSize {
				return errors.New("gpu: the experts of one layer differ in format or shape")
			}
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

// bankLayout places experts [lo, hi) in the bank from offset 0.
func bankLayout(experts []MLP) ([]expertPlace, int64) {
	places := make([]expertPlace, len(experts))
	var off int64
	for i, e := range experts {
		for j, m := range []*kernels.Matrix{e.Gate, e.Up, e.Down} {
			data, scales := matrixBytes(m)
			places[i].data[j] = off
			off += roundUp(int64(len(data))+4, align)
			places[i].scales[j] = off
			off += roundUp(int64(len(scales))+4, align)
		}
	}
	return places, off
}

// loadBank uploads experts lo.. into the bank, as many as one binding and
// the budget allow, and returns the end of the batch.
func (d *Device) loadBank(experts []MLP, lo int) (int, error) {
	_, one := bankLayout(experts[lo : lo+1])
	limit := min(d.maxRange, d.budget-d.used+bankSize(d.bank))
	if one > limit {
		return 0, fmt.Errorf("gpu: one expert of %d bytes does not fit the device budget (%s free) or binding range", one, memText(limit))
	}
	hi := min(len(experts), lo+int(limit/one))
	places, need := bankLayout(experts[lo:hi])
	if _, err := d.ensure(&d.bank, need, C.SPOOL_MEM_DEVICE); err != nil {
		// The bank could not grow by half again; try exactly one batch.
		return 0, err
	}
	for i, e := range experts[lo:hi] {
		for j, m := range []*kernels.Matrix{e.Gate, e.Up, e.Down} {
			data, scales := matrixBytes(m)
			if err := d.upload(d.bank, places[i].data[j], data); err != nil {
				return 0, err
			}
			if err := d.upload(d.bank, places[i].scales[j], scales); err != nil {
				return 0, err
			}
		}
	}
	return hi, nil
}

func bankSize(b *buffer) int64 {
	if b == nil {
		return 0
	}
	return b.size
}

// expertBatch applies the experts in the bank to the rows that chose them,
// writing each (row, slot) output into eo.
func (o *op) expertBatch(experts []MLP, ids []int, users map[int][]int32, k, H int, xr, hR, uR, eoR region,
	tables, lists []uint32, tablesT, listsT transfer) error {
	d := o.d
	places, bankBytes := bankLayout(experts)
	Z := len(experts)
	inter := experts[0].Gate.Rows
	pairs := len(lists) / 2
	in, out := lists[:pairs], lists[pairs:]
	maxZ := len(tables) / 12
	gateT, upT, downT := tables[:4*maxZ], tables[4*maxZ:8*maxZ], tables[8*maxZ:]
	base, most := 0, 0
	for z, e := range ids {
		us := users[e]
		for j, p := range us {
			in[base+j] = uint32(int(p) / k)
			out[base+j] = uint32(p)
		}
		for t, tab := range [][]uint32{gateT, upT, downT} {
			tab[4*z] = uint32(places[z].data[t])
			tab[4*z+1] = uint32(places[z].scales[t] / 4)
			tab[4*z+2] = uint32(len(us))
			tab[4*z+3] = uint32(base)
		}
		base += len(us)
		most = max(most, len(us))
	}
	if err := o.stage(tablesT, listsT); err != nil {
		return err
	}
	tr, lr := tablesT.region(), listsT.region()
	tb := func(t int) binding { return binding{d.work, tr.off + int64(16*maxZ*t), int64(16 * Z)} }
	inB := binding{d.work, lr.off, int64(4 * pairs)}
	outB := binding{d.work, lr.off + int64(4*pairs), int64(4 * pairs)}
	bank := binding{d.bank, 0, bankBytes}
	gw := &placed{m: experts[0].Gate, data: bank, scales: bank}
	dw := &placed{m: experts[0].Down, data: bank, scales: bank}
	x := o.bind(xr)
	if err := o.gemm(gemm{w: gw, gather: 1, M: inter, K: H, N: most, Z: Z, x: x, xLd: H, y: o.bind(hR), yLd: inter, table: tb(0), rows: inB}); err != nil {
		return err
	}
	if err := o.gemm(gemm{w: gw, gather: 1, M: inter, K: H, N: most, Z: Z, x: x, xLd: H, y: o.bind(uR), yLd: inter, table: tb(1), rows: inB}); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	if err := o.siluMul(o.bind(hR), o.bind(uR), base*inter); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	if err := o.gemm(gemm{w: dw, gather: 2, M: H, K: inter, N: most, Z: Z, x: o.bind(hR), xLd: inter, y: o.bind(eoR), yLd: H, table: tb(2), rows: outB}); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	// The bank is reused by the next batch: run this one first.
	return o.submit()
}
