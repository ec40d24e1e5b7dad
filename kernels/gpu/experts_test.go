//go:build vulkan && cgo

package gpu_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/kernels/gpu"
)

// TestMoEExpertPaths applies a layer's experts both ways on one device:
// in place where the device reads host memory (lavapipe does) and copied
// into the bank, in double-buffered groups whose products overlap the
// next group's copies (a bank of many groups, of one expert a half, of
// one half only). The delivery poisons each expert once it is Done, so a
// backend that read an expert after giving it back would fail.
func TestMoEExpertPaths(t *testing.T) {
	device(t)
	c := moeCase{48, 6, 96, 40, 29, 32, kernels.Int4Group, true}
	one := int64(3 * (2*256 + ((40*96/2+4+255)/256)*256))
	for _, tt := range []struct {
		name string
		opts gpu.Options
	}{
		{"default", gpu.Options{Device: -1}},
		{"copied", gpu.Options{Device: -1, CopyExperts: true}},
		{"copied_halves_of_2", gpu.Options{Device: -1, CopyExperts: true, BankBytes: 5 * one}},
		{"copied_halves_of_1", gpu.Options{Device: -1, CopyExperts: true, BankBytes: 2 * one}},
		{"copied_one_half", gpu.Options{Device: -1, CopyExperts: true, BankBytes: one + one/2}},
		{"staged_halves_of_2", gpu.Options{Device: -1, CopyExperts: true, StageExperts: true, BankBytes: 5 * one}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := gpu.Open(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			before := d.Times()
			checkMoEDelivery(t, d, rand.New(rand.NewPCG(13, 14)), c, true)
			tm := d.Times().Sub(before)
			inPlace := d.Info().InPlace && !tt.opts.CopyExperts
			t.Logf("in place %v: experts %.4fs, copy wait %.4fs, ring copy %.4fs, %d submissions", inPlace, tm.Experts, tm.CopyWait, tm.RingCopy, tm.Submits)
			if inPlace != (tm.ExpertsInPlace > 0) || inPlace != (tm.ExpertsCopied == 0) {
				t.Errorf("in place %v: %d experts in place, %d copied", inPlace, tm.ExpertsInPlace, tm.ExpertsCopied)
			}
			if tt.opts.StageExperts && tm.RingCopy == 0 || inPlace && tm.RingCopy != 0 {
				t.Errorf("staged %v, in place %v: the staging ring copied for %.4fs", tt.opts.StageExperts, inPlace, tm.RingCopy)
			}
			if tm.CopyWait < 0 || tm.CopyWait > tm.Experts {
				t.Errorf("copy wait %.4fs outside the experts' %.4fs", tm.CopyWait, tm.Experts)
			}
		})
	}
}

// TestMoEResidentExperts keeps some of a layer's experts resident in
// device memory: the first call copies every expert and keeps as many as
// the store holds; the next calls apply those from device memory (copying
// fewer bytes) with the same results, and keep the most used when the
// layer's routing moves.
func TestMoEResidentExperts(t *testing.T) {
	device(t)
	c := moeCase{40, 4, 64, 32, 23, 0, kernels.Int4Row, false}
	// An expert in the bank: three int4 [32, 64] / [64, 32] matrices of
	// 1,024 bytes (+4, to 1,280) and scales of 128, 128 and 256 bytes (+4,
	// to 256, 256, 512).
	const one = 3*1280 + 256 + 256 + 512
	d, err := gpu.Open(gpu.Options{Device: -1, CopyExperts: true, ResidentExpertBytes: 12 * one})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := rand.New(rand.NewPCG(15, 16))
	layer := newMoELayer(r, c)
	x := randVec(r, c.n*c.hidden)
	for call := range 3 {
		before := d.Times()
		if call == 2 {
			x = randVec(r, c.n*c.hidden) // other rows: other experts
		}
		layer.check(t, d, r, x, true)
		tm := d.Times().Sub(before)
		n, bytes := d.ResidentExperts()
		t.Logf("call %d: %d experts copied, %d resident; %d resident in %d bytes", call, tm.ExpertsCopied, tm.ExpertsResident, n, bytes)
		if n != 12 || bytes != 12*one {
			t.Errorf("call %d: %d experts resident in %d bytes, want 12 in %d", call, n, bytes, 12*one)
		}
		switch {
		case call == 0 && tm.ExpertsResident != 0:
			t.Errorf("the first call applied %d resident experts, want none", tm.ExpertsResident)
		case call == 1 && tm.ExpertsResident != 12:
			// The same rows: every resident expert is routed to again.
			t.Errorf("the second call applied %d resident experts, want 12 (and copied %d)", tm.ExpertsResident, tm.ExpertsCopied)
		case call == 2 && tm.ExpertsResident == 0:
			t.Errorf("the third call applied no resident expert")
		}
	}
}

// moeLayer is a random MoE layer and its experts.
type moeLayer struct {
	c       moeCase
	l       *gpu.MoE
	experts []gpu.MLP
}

func newMoELayer(r *rand.Rand, c moeCase) *moeLayer {
	l := &gpu.MoE{
		Router:    randMatrix(r, kernels.F32, c.E, c.hidden, 0, 0),
		Bias:      randVec(r, c.E),
		TopK:      c.k,
		Normalize: true,
		Scale:     2.5,
	}
	for i := range l.Bias {
		l.Bias[i] *= 0.05
	}
	if c.shared {
		l.Shared = randMLP(r, c.f, c.hidden, c.inter, c.gs)
	}
	experts := make([]gpu.MLP, c.E)
	for e := range experts {
		experts[e] = *randMLP(r, c.f, c.hidden, c.inter, c.gs)
	}
	return &moeLayer{c: c, l: l, experts: experts}
}

// checkMoEDelivery checks one MoE layer against the reference; with
// poison the delivery overwrites each expert once it is Done.
func checkMoEDelivery(t *testing.T, d *gpu.Device, r *rand.Rand, c moeCase, poison bool) {
	t.Helper()
	m := newMoELayer(r, c)
	m.check(t, d, r, randVec(r, c.n*c.hidden), poison)
}

// check applies the layer to rows x on d and compares with the reference.
func (m *moeLayer) check(t *testing.T, d *gpu.Device, r *rand.Rand, x []float32, poison bool) {
	t.Helper()
	c, l, experts := m.c, m.l, m.experts
	var del *delivery
	fetch := func(ids []int) (gpu.Experts, error) {
		if !slices.IsSorted(ids) {
			t.Errorf("fetch of unsorted ids %v", ids)
		}
		del = &delivery{order: r.Perm(len(ids)), done: make([]bool, len(ids)), poison: poison}
		for _, e := range ids {
			if poison {
				del.experts = append(del.experts, cloneMLP(experts[e]))
			} else {
				del.experts = append(del.experts, experts[e])
			}
		}
		return del, nil
	}
	y := make([]float32, c.n*c.hidden)
	routes, err := d.MoE(y, x, c.n, l, fetch)
	if err != nil {
		t.Fatal(err)
	}
	if !del.released || slices.Contains(del.done, false) {
		t.Errorf("released %v, done %v", del.released, del.done)
	}
	ids, ws := routeRef(l, x, c.n)
	if !slices.Equal(routes.IDs, ids) {
		t.Fatalf("routes %v, want %v", routes.IDs, ids)
	}
	closeRel(t, "route weights", routes.Weights, ws, 1e-5)
	want := make([]float32, c.n*c.hidden)
	if l.Shared != nil {
		want = mlpRef(l.Shared, x, c.n)
	}
	for i := 0; i < c.n; i++ {
		row := x[i*c.hidden : (i+1)*c.hidden]
		acc := make([]float32, c.hidden)
		order := make([]int, c.k)
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(a, b int) int { return int(ids[i*c.k+a] - ids[i*c.k+b]) })
		for _, j := range order {
			eo := mlpRef(&experts[ids[i*c.k+j]], row, 1)
			for h := range acc {
				acc[h] += ws[i*c.k+j] * eo[h]
			}
		}
		for h := range acc {
			want[i*c.hidden+h] += acc[h]
		}
	}
	closeRel(t, "MoE output", y, want, 1e-5)
}
