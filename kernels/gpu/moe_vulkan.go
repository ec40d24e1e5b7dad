//go:build vulkan && cgo

package gpu

/*
#include "vk.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
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
	// The experts' scratch is sized for the worst case, n*k (row, slot)
	// pairs, so that one layout serves every batch of experts.
	pairs := n * k
	maxZ := min(E, pairs)
	tables := make([]uint32, 3*4*maxZ)
	lists := make([]uint32, 2*pairs) // rows in, then (row, slot) out
	combine := make([]uint32, 2*pairs)
	tablesT, listsT, combineT := o.later(u32bytes(tables)), o.later(u32bytes(lists)), o.later(u32bytes(combine))
	eoR := o.floats(pairs * H) // every (row, slot) output is written

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
	delivery, err := fetch(union)
	if err != nil {
		return Routes{}, err
	}
	defer delivery.Release()
	if err := o.applyExperts(delivery, union, users, k, H, xr, eoR, tables, lists, tablesT, listsT); err != nil {
		return Routes{}, err
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

// bank is a batch of experts being gathered in the bank buffer.
type bank struct {
	ids    []int // expert ids in bank order
	places []expertPlace
	first  MLP   // shapes and formats of the batch
	used   int64 // bytes taken
}

// expertBytes is the bank space one expert takes.
func expertBytes(e MLP) int64 {
	var n int64
	for _, m := range []*kernels.Matrix{e.Gate, e.Up, e.Down} {
		data, scales := matrixBytes(m)
		n += roundUp(int64(len(data))+4, align) + roundUp(int64(len(scales))+4, align)
	}
	return n
}

// applyExperts receives the experts as they become ready, copies each into
// the bank (releasing it to its source at once) and applies every full
// bank, and the last, to the rows that chose its experts.
func (o *op) applyExperts(delivery Experts, union []int, users map[int][]int32, k, H int, xr, eoR region,
	tables, lists []uint32, tablesT, listsT transfer) error {
	d := o.d
	var b bank
	var hR, uR region
	capacity := int64(0)
	for {
		t0 := time.Now()
		idx, e, err := delivery.Next()
		addTime(&d.times.Deliver, t0)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if idx < 0 || idx >= len(union) {
			return fmt.Errorf("gpu: expert index %d of %d", idx, len(union))
		}
		if err := checkExpert(&e, &b.first, len(b.ids) == 0, H); err != nil {
			return err
		}
		need := expertBytes(e)
		if len(b.ids) == 0 && capacity == 0 {
			// First expert: size the scratch and the bank.
			inter := e.Gate.Rows
			pairs := len(lists) / 2
			hR, uR = o.floats(pairs*inter), o.floats(pairs*inter)
			if err := o.growWork(); err != nil {
				return err
			}
			capacity = min(d.maxRange, d.budget-d.used+bankSize(d.bank), int64(len(union))*need)
			if d.bankBytes > 0 {
				capacity = min(capacity, d.bankBytes)
			}
			if capacity < need {
				return fmt.Errorf("gpu: one expert of %d bytes does not fit the device budget or binding range (%s free)", need, memText(capacity))
			}
			if d.bank == nil || d.bank.size < capacity {
				// Exactly the capacity: the bank is a line of the plan.
				d.freeBuffer(d.bank)
				d.bank = nil
				nb, err := d.newBuffer(capacity, C.SPOOL_MEM_DEVICE)
				if err != nil {
					return err
				}
				d.bank = nb
			}
			b.first = e
		}
		if b.used+need > capacity {
			if err := d.flush(); err != nil {
				return err
			}
			if err := o.expertBatch(&b, users, k, H, xr, hR, uR, eoR, tables, lists, tablesT, listsT); err != nil {
				return err
			}
			b = bank{first: b.first}
		}
		t0 = time.Now()
		var p expertPlace
		for j, m := range []*kernels.Matrix{e.Gate, e.Up, e.Down} {
			data, scales := matrixBytes(m)
			p.data[j] = b.used
			if err := d.upload(d.bank, b.used, data); err != nil {
				return err
			}
			b.used += roundUp(int64(len(data))+4, align)
			p.scales[j] = b.used
			if err := d.upload(d.bank, b.used, scales); err != nil {
				return err
			}
			b.used += roundUp(int64(len(scales))+4, align)
		}
		addTime(&d.times.Experts, t0)
		delivery.Done(idx)
		b.ids = append(b.ids, union[idx])
		b.places = append(b.places, p)
	}
	t0 := time.Now()
	if err := d.flush(); err != nil {
		return err
	}
	addTime(&d.times.Experts, t0)
	if len(b.ids) > 0 {
		return o.expertBatch(&b, users, k, H, xr, hR, uR, eoR, tables, lists, tablesT, listsT)
	}
	return nil
}

func bankSize(b *buffer) int64 {
	if b == nil {
		return 0
	}
	return b.size
}

// expertBatch applies the experts in the bank to the rows that chose them,
// writing each (row, slot) output into eo.
func (o *op) expertBatch(b *bank, users map[int][]int32, k, H int, xr, hR, uR, eoR region,
	tables, lists []uint32, tablesT, listsT transfer) error {
	d := o.d
	Z := len(b.ids)
	inter := b.first.Gate.Rows
	pairs := len(lists) / 2
	in, out := lists[:pairs], lists[pairs:]
	maxZ := len(tables) / 12
	gateT, upT, downT := tables[:4*maxZ], tables[4*maxZ:8*maxZ], tables[8*maxZ:]
	base, most := 0, 0
	for z, e := range b.ids {
		us := users[e]
		for j, p := range us {
			in[base+j] = uint32(int(p) / k)
			out[base+j] = uint32(p)
		}
		for t, tab := range [][]uint32{gateT, upT, downT} {
			tab[4*z] = uint32(b.places[z].data[t])
			tab[4*z+1] = uint32(b.places[z].scales[t] / 4)
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
	bk := binding{d.bank, 0, b.used}
	gw := &placed{m: b.first.Gate, data: bk, scales: bk}
	dw := &placed{m: b.first.Down, data: bk, scales: bk}
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
