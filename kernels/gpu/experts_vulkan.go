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

	"github.com/spoolhq/spool/kernels"
)

// Routed experts reach the MoE kernels in ascending id order (those the
// source delivers ahead of their turn wait for it), in groups, one of two
// ways:
//
//   - copied: into one half of the expert bank (by the host's memcpy where
//     the bank is host-visible device memory, else through the staging
//     ring), and applied as one batch per group. A group's products are
//     submitted without waiting, so the next group's copies (the host's
//     memcpy into staging and the device copies into the other half) run
//     while they compute; a half is refilled only once the group that read
//     it has finished. Only the first group's copies, and any that outlast
//     the computation before them, are waited for (Times.CopyWait);
//   - in place: where the device reads host memory (unified memory with
//     host import, Info.InPlace), an expert's matrices are bound where the
//     expert source put them: no copy at all. Each is applied as it
//     arrives and waited for before the next is taken, since the source
//     may recycle its memory for a later expert of the same delivery once
//     told (Experts.Done).
//
// A group's products write each (row, slot) output into a scratch that
// holds one group's outputs (at most maxPairs of them), and the group's
// outputs are then added, weighted, to each row's running sum (the
// accumulate shader), so the scratch does not grow with the rows times
// the experts per row: a layer-major forward applies each expert to every
// row of a long prompt segment at once. Groups in ascending id order make
// each row's sum take its experts in that order.

// groupShare bounds a copied group to a share of the layer's experts, so
// that all but the first group's copies can hide behind computation.
const groupShare = 8

// groupSet is the scratch of one group in flight: its gather tables and
// row lists, the accumulate's lists (the group's rows, where each row's
// entries start, and each entry's output) and weights, and the
// submission that last read them.
type groupSet struct {
	tables, lists   []uint32
	acc             []uint32
	weights         []float32
	tablesT, listsT transfer
	accT, weightsT  transfer
	seq             uint64
}

// tableStride is the uint32 values of one matrix's table in a set: the
// batch's entries (4 a member), then an aligned entry for a lone member.
func tableStride(maxZ int) int { return int(roundUp(int64(4*maxZ), align/4)) + align/4 }

// groupSets reserves two groups' scratch for up to maxZ experts and pairs
// (row, slot) pairs, before begin.
func (o *op) groupSets(maxZ, pairs int) *[2]groupSet {
	var sets [2]groupSet
	for i := range sets {
		s := &sets[i]
		s.tables = make([]uint32, 3*tableStride(maxZ))
		s.lists = make([]uint32, 2*pairs) // rows in, then outputs
		s.acc = make([]uint32, 3*pairs+1) // rows, starts, outputs
		s.weights = make([]float32, pairs)
		s.tablesT, s.listsT = o.later(u32bytes(s.tables)), o.later(u32bytes(s.lists))
		s.accT, s.weightsT = o.later(u32bytes(s.acc)), o.later(bytesOf(s.weights))
	}
	return &sets
}

// member is one expert of a group: copied into the bank (place) or used
// in place (mats).
type member struct {
	index, id int
	place     expertPlace
	mats      *[3]*placed
}

// kind says where a batch's members lie.
type kind uint8

const (
	inBank     kind = iota // copied into the bank half being filled
	inPlace                // one member bound where it lies in host memory
	inResident             // resident in one slab of device memory
)

// groups applies a MoE layer's routed experts in ascending id order.
type groups struct {
	o       *op
	layer   *MoE
	union   []int
	users   map[int][]int32
	weights []float32 // the routes' weights, by (row, slot)
	k, H    int
	xr      region
	eoR     region // one group's (row, slot) outputs
	accR    region // each row's running sum
	sets    *[2]groupSet
	hR, uR  region
	// maxPairs bounds a group's (row, slot) pairs (the scratch of eoR,
	// hR and uR); pairs counts the open batch's.
	maxPairs, pairs int
	first           MLP   // shapes and formats of the layer's experts
	need            int64 // bank bytes of one expert
	count           int   // experts received

	// The bank's halves: base offsets, size, and the submission that last
	// read each; cur is the half being filled, used its fill, batch its
	// members, n the groups submitted.
	halves  int
	half    int64
	halfSeq [2]uint64
	cur     int
	used    int64
	batch   []member
	n       int
	perHalf int // most members of a group
	// kind and slab say where the open batch's members lie.
	kind kind
	slab int
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

func (g *groups) apply(delivery Experts) error {
	d := g.o.d
	got := make([]*MLP, len(g.union))
	for next := range g.union {
		for got[next] == nil {
			t0 := time.Now()
			idx, e, err := delivery.Next()
			addTime(&d.times.Deliver, t0)
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("gpu: expert %d was never delivered", g.union[next])
			}
			if err != nil {
				return err
			}
			if idx < 0 || idx >= len(g.union) || got[idx] != nil {
				return fmt.Errorf("gpu: expert index %d of %d delivered again or out of range", idx, len(g.union))
			}
			got[idx] = &e
		}
		e := *got[next]
		if err := checkExpert(&e, &g.first, g.count == 0, g.H); err != nil {
			return err
		}
		if g.count == 0 {
			if err := g.start(e); err != nil {
				return err
			}
		}
		g.count++
		m := member{index: next, id: g.union[next]}
		users := len(g.users[m.id])
		if rp, ok := d.resident.lookup(g.layer, m.id); ok {
			// Resident in device memory: the source's copy is not read.
			delivery.Done(next)
			d.times.ExpertsResident++
			if err := g.addResident(m, rp, users); err != nil {
				return err
			}
			continue
		}
		if d.expertsInPlace() {
			t0 := time.Now()
			mats, ok := d.placeExpertInPlace(e)
			addTime(&d.times.Experts, t0)
			if ok {
				d.times.ExpertsInPlace++
				m.mats = mats
				if err := g.inPlace(m, users); err != nil {
					return err
				}
				delivery.Done(next)
				continue
			}
		}
		if err := g.copyIn(e, &m, users); err != nil {
			return err
		}
		delivery.Done(next)
	}
	if len(g.batch) > 0 {
		return g.submitBatch()
	}
	return nil
}

// room makes room in the open batch for a member of kind k (slab for a
// resident one) with users (row, slot) pairs: the batch is submitted
// first when it holds members of another kind or slab, or is full.
func (g *groups) room(k kind, slab, users int) error {
	if len(g.batch) > 0 && (g.kind != k || g.slab != slab || g.pairs+users > g.maxPairs || len(g.batch) >= g.perHalf) {
		if err := g.submitBatch(); err != nil {
			return err
		}
	}
	g.kind, g.slab = k, slab
	return nil
}

// addResident adds a resident expert to the open batch (of its slab).
func (g *groups) addResident(m member, rp residentPlace, users int) error {
	sl := g.o.d.resident.slabs[rp.slab]
	base := int64(rp.slot) * sl.slot
	for t := range 3 {
		m.place.data[t] = base + rp.place.data[t]
		m.place.scales[t] = base + rp.place.scales[t]
	}
	if err := g.room(inResident, rp.slab, users); err != nil {
		return err
	}
	g.batch = append(g.batch, m)
	g.pairs += users
	return nil
}

// start sizes the scratch of the layer's experts from the first one.
func (g *groups) start(e MLP) error {
	o := g.o
	inter := e.Gate.Rows
	g.hR, g.uR = o.floats(g.maxPairs*inter), o.floats(g.maxPairs*inter)
	if err := o.growWork(); err != nil {
		return err
	}
	g.first = e
	g.need = expertBytes(e)
	g.perHalf = max(1, (len(g.union)+groupShare-1)/groupShare)
	return nil
}

// ensureBank allocates the bank: two halves of a group each where the
// budget allows, else one (no overlap).
func (g *groups) ensureBank() error {
	if g.halves > 0 {
		return nil
	}
	d := g.o.d
	want := 2 * int64(min(g.perHalf, len(g.union))) * g.need
	capacity := min(d.maxRange, d.budget-d.used+bankSize(d.bank), want)
	if d.bankBytes > 0 {
		capacity = min(capacity, d.bankBytes)
	}
	if capacity < g.need {
		return fmt.Errorf("gpu: one expert of %d bytes does not fit the device budget or binding range (%s free)", g.need, memText(capacity))
	}
	if d.bank == nil || d.bank.size < capacity {
		// Exactly the capacity: the bank is a line of the plan. Device
		// memory the host writes directly where there is enough of it: the
		// next group is then copied in by the host's memcpy alone, beside
		// the products, not by device copies queued behind them.
		d.freeBuffer(d.bank)
		d.bank = nil
		var nb *buffer
		err := errors.New("the staging ring")
		if !d.stageExperts {
			nb, err = d.newBuffer(capacity, C.SPOOL_MEM_MAPPED)
		}
		if err != nil {
			if nb, err = d.newBuffer(capacity, C.SPOOL_MEM_DEVICE); err != nil {
				return err
			}
		}
		d.bank = nb
	}
	g.halves, g.half = 1, capacity/align*align
	if h := capacity / 2 / align * align; h >= g.need {
		g.halves, g.half = 2, h
	}
	g.perHalf = min(g.perHalf, int(g.half/g.need))
	return nil
}

// copyIn copies expert e into the bank half being filled, first
// submitting the open batch when it is of another kind, full, or the
// half has no room, and waiting for the group that last read the half
// it moves to.
func (g *groups) copyIn(e MLP, m *member, users int) error {
	d := g.o.d
	if err := g.ensureBank(); err != nil {
		return err
	}
	if len(g.batch) > 0 && g.kind == inBank && g.used+g.need > g.half {
		if err := g.submitBatch(); err != nil {
			return err
		}
	}
	if err := g.room(inBank, 0, users); err != nil {
		return err
	}
	t0 := time.Now()
	if len(g.batch) == 0 {
		// The half's previous group must be done reading it.
		if rc := C.spool_vk_wait(d.v, C.uint64_t(g.halfSeq[g.cur])); rc != 0 {
			return d.lastError("wait", rc)
		}
		t0 = time.Now()
	}
	base := int64(g.cur) * g.half
	put := func(off int64, b []byte) error {
		if d.bank.mapped != nil {
			parallelCopy(d.bank.bytes(base+off, int64(len(b))), b)
			return nil
		}
		return d.upload(d.bank, base+off, b)
	}
	for j, mat := range []*kernels.Matrix{e.Gate, e.Up, e.Down} {
		data, scales := matrixBytes(mat)
		m.place.data[j] = g.used
		if err := put(g.used, data); err != nil {
			return err
		}
		g.used += roundUp(int64(len(data))+4, align)
		m.place.scales[j] = g.used
		if err := put(g.used, scales); err != nil {
			return err
		}
		g.used += roundUp(int64(len(scales))+4, align)
	}
	g.copied(t0)
	d.times.ExpertsCopied++
	g.batch = append(g.batch, *m)
	g.pairs += users
	return nil
}

// copied adds the time since t0 to Times.Experts and, unless the device
// is still computing (the copy hid behind it), to Times.CopyWait.
func (g *groups) copied(t0 time.Time) {
	d := g.o.d
	s := time.Since(t0).Seconds()
	d.times.Experts += s
	if C.spool_vk_busy(d.v) == 0 {
		d.times.CopyWait += s
	}
}

// inPlace applies expert m, bound where it lies, and waits for it.
func (g *groups) inPlace(m member, users int) error {
	if len(g.batch) > 0 {
		if err := g.submitBatch(); err != nil {
			return err
		}
	}
	g.kind, g.slab = inPlace, 0
	g.batch = append(g.batch, m)
	g.pairs = users
	if err := g.submitBatch(); err != nil {
		return err
	}
	return g.o.submit()
}

// submitBatch submits the open batch.
func (g *groups) submitBatch() error {
	err := g.submit(g.batch, g.kind, g.slab)
	g.batch, g.pairs = g.batch[:0], 0
	return err
}

// submit records the products of members (lying as k says; slab for
// resident ones) and their outputs' accumulation, and submits them
// without waiting.
func (g *groups) submit(ms []member, k kind, slab int) error {
	o, d := g.o, g.o.d
	set := &g.sets[g.n%2]
	// The set's previous group must be done with its tables.
	if rc := C.spool_vk_wait(d.v, C.uint64_t(set.seq)); rc != 0 {
		return d.lastError("wait", rc)
	}
	if k == inBank {
		// The copies into the half are submitted; the barrier at the start
		// of the batch orders the products after them.
		t0 := time.Now()
		if rc := C.spool_vk_stage_kick(d.v); rc != 0 {
			return d.lastError("upload", rc)
		}
		g.copied(t0)
	}
	if err := o.expertBatch(g, set, ms, k, slab); err != nil {
		return err
	}
	var seq C.uint64_t
	t0 := time.Now()
	rc := C.spool_vk_submit_async(d.v, &seq)
	d.timeRun(t0)
	if rc != 0 {
		return d.lastError("submit", rc)
	}
	set.seq = uint64(seq)
	if k == inBank {
		g.halfSeq[g.cur] = uint64(seq)
		g.cur = (g.cur + 1) % g.halves
		g.used = 0
	}
	g.n++
	return nil
}

// expertBatch records the products of g's batch: every member applied to
// the rows that chose it, its outputs written into eo in the batch's
// order, then added, weighted, to each row's sum in acc.
func (o *op) expertBatch(g *groups, set *groupSet, b []member, k kind, slab int) error {
	d := o.d
	Z := len(b)
	inter := g.first.Gate.Rows
	pairs := len(set.lists) / 2
	in, out := set.lists[:pairs], set.lists[pairs:]
	stride := len(set.tables) / 3
	lone := k == inPlace // one member bound where it lies
	entry := 0           // a batch's entries start its table
	if lone {
		entry = stride - align/4
	}
	base, most := 0, 0
	for z, m := range b {
		us := g.users[m.id]
		for j, p := range us {
			in[base+j] = uint32(int(p) / g.k)
			out[base+j] = uint32(base + j)
		}
		for t := 0; t < 3; t++ {
			tab := set.tables[t*stride+entry+4*z:]
			if lone {
				tab[0], tab[1] = uint32(m.mats[t].wOff), uint32(m.mats[t].sOff)
			} else {
				tab[0], tab[1] = uint32(m.place.data[t]), uint32(m.place.scales[t]/4)
			}
			tab[2], tab[3] = uint32(len(us)), uint32(base)
		}
		base += len(us)
		most = max(most, len(us))
	}
	// Order this batch after the copies into its half and after the
	// batches before it, which share the scratch.
	if err := o.barrier(); err != nil {
		return err
	}
	if k == inBank && d.resident.limit > 0 {
		for _, m := range b {
			if err := g.keepResident(m); err != nil {
				return err
			}
		}
	}
	rowsIn := g.accumulateLists(set, b, base)
	if err := o.stage(set.tablesT, set.listsT, set.accT, set.weightsT); err != nil {
		return err
	}
	tr, lr := set.tablesT.region(), set.listsT.region()
	tb := func(t int) binding {
		return binding{d.work, tr.off + int64(4*(t*stride+entry)), int64(16 * Z)}
	}
	rows := binding{d.work, lr.off, int64(4 * 2 * pairs)}
	mat := func(t int) *placed {
		if lone {
			return b[0].mats[t]
		}
		bk := binding{d.bank, int64(g.cur) * g.half, g.used}
		if k == inResident {
			buf := d.resident.slabs[slab].buf
			bk = binding{buf, 0, buf.size}
		}
		return &placed{m: []*kernels.Matrix{g.first.Gate, g.first.Up, g.first.Down}[t], data: bk, scales: bk}
	}
	x := o.bind(g.xr)
	if err := o.gemm(gemm{w: mat(0), gather: 1, M: inter, K: g.H, N: most, Z: Z, x: x, xLd: g.H, y: o.bind(g.hR), yLd: inter, table: tb(0), rows: rows}); err != nil {
		return err
	}
	if err := o.gemm(gemm{w: mat(1), gather: 1, M: inter, K: g.H, N: most, Z: Z, x: x, xLd: g.H, y: o.bind(g.uR), yLd: inter, table: tb(1), rows: rows}); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	if err := o.siluMul(o.bind(g.hR), o.bind(g.uR), base*inter); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	if err := o.gemm(gemm{w: mat(2), gather: 2, M: g.H, K: inter, N: most, Z: Z, x: o.bind(g.hR), xLd: inter, y: o.bind(g.eoR), yLd: g.H, table: tb(2), rows: rows, listOff: pairs}); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	// No barrier after the accumulation: copies submitted next (into the
	// other half) may run beside it; whatever reads or writes what it uses
	// starts with a barrier (the next batch, the final add).
	ar, wr := set.accT.region(), set.weightsT.region()
	gy, gz := grid2(rowsIn)
	return o.dispatch(shAccumulate, nil, []binding{o.bind(g.accR), o.bind(g.eoR), {d.work, ar.off, ar.size}, {d.work, wr.off, wr.size}},
		[]uint32{uint32(rowsIn), uint32(g.H)}, (g.H+255)/256, gy, gz)
}

// accumulateLists fills set's accumulate lists for batch b, whose pairs
// outputs lie in eo in member order: the batch's rows (ascending), where
// each row's entries start, and each entry's output and weight, a row's
// entries in member order (ascending expert id). It returns the rows.
func (g *groups) accumulateLists(set *groupSet, b []member, pairs int) int {
	type entry struct{ row, local, pair int32 }
	entries := make([]entry, 0, pairs)
	for _, m := range b {
		for _, p := range g.users[m.id] {
			entries = append(entries, entry{row: p / int32(g.k), local: int32(len(entries)), pair: p})
		}
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return int(a.row - b.row) })
	R := 0
	for i, e := range entries {
		if i == 0 || e.row != entries[i-1].row {
			R++
		}
	}
	ids, starts, locals := set.acc[:R], set.acc[R:2*R+1], set.acc[2*R+1:2*R+1+len(entries)]
	r := -1
	for i, e := range entries {
		if i == 0 || e.row != entries[i-1].row {
			r++
			ids[r], starts[r] = uint32(e.row), uint32(i)
		}
		locals[i] = uint32(e.local)
		set.weights[i] = g.weights[e.pair]
	}
	starts[R] = uint32(len(entries))
	return R
}

func bankSize(b *buffer) int64 {
	if b == nil {
		return 0
	}
	return b.size
}

// expertsInPlace reports whether routed experts are bound where they lie.
func (d *Device) expertsInPlace() bool { return d.info.InPlace && !d.copyExperts }

// placeExpertInPlace binds e's matrices where they lie in host memory
// (importing their pages, or reusing an import that covers them).
func (d *Device) placeExpertInPlace(e MLP) (*[3]*placed, bool) {
	var mats [3]*placed
	for t, m := range []*kernels.Matrix{e.Gate, e.Up, e.Down} {
		data, scales := matrixBytes(m)
		p, ok := d.placeInPlace(m, data, scales)
		if !ok {
			return nil, false
		}
		mats[t] = p
	}
	return &mats, true
}
