//go:build vulkan && cgo

package gpu_test

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/kernels/gpu"
)

var (
	devOnce sync.Once
	dev     *gpu.Device
	devErr  error
)

// device opens the test device once (lavapipe in CI). Without one the
// tests fail under CI=true and skip, saying why, elsewhere.
func device(t testing.TB) *gpu.Device {
	t.Helper()
	devOnce.Do(func() { dev, devErr = gpu.Open(gpu.Options{Device: -1}) })
	if devErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Vulkan device (CI needs lavapipe: mesa-vulkan-drivers): %v", devErr)
		}
		t.Skipf("no Vulkan device: %v", devErr)
	}
	return dev
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dev != nil {
		dev.Close()
	}
	os.Exit(code)
}

func TestInfo(t *testing.T) {
	d := device(t)
	info := d.Info()
	t.Logf("%s; driver %q; unified %v, host import %v, in place %v", info, info.Driver, info.Unified, info.HostImport, info.InPlace)
	if info.Name == "" || info.API == "" || info.DeviceMemory <= 0 {
		t.Errorf("incomplete info %+v", info)
	}
}

// randMatrix returns a random matrix of the format; offset shifts its
// bytes inside a larger allocation (unaligned views, as in a mapped shard).
func randMatrix(r *rand.Rand, f kernels.Format, rows, cols, gs, offset int) *kernels.Matrix {
	m := &kernels.Matrix{Format: f, Rows: rows, Cols: cols, GroupSize: gs}
	switch f {
	case kernels.F32:
		m.F32 = make([]float32, rows*cols)
		for i := range m.F32 {
			m.F32[i] = float32(r.NormFloat64())
		}
		return m
	case kernels.Int4Row:
		m.GroupSize = 0
	}
	buf := make([]byte, offset+rows*m.RowBytes())
	for i := range buf {
		buf[i] = byte(r.IntN(256))
	}
	m.Data = buf[offset:]
	m.Scales = make([]float32, rows*m.ScalesPerRow())
	for i := range m.Scales {
		m.Scales[i] = float32(0.01 + 0.05*r.Float64())
	}
	return m
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// absDot is sum_i |W[row, i] x[i]|, the scale of the rounding error.
func absDot(m *kernels.Matrix, row int, x []float32) float64 {
	w := make([]float32, m.Cols)
	kernels.DequantRow(w, m, row)
	var s float64
	for i, v := range w {
		s += math.Abs(float64(v) * float64(x[i]))
	}
	return s
}

func compareRows(t *testing.T, what string, got, want []float32, m *kernels.Matrix, x []float32, n int) {
	t.Helper()
	for b := 0; b < n; b++ {
		for r := 0; r < m.Rows; r++ {
			g, w := got[b*m.Rows+r], want[b*m.Rows+r]
			tol := 2e-5*absDot(m, r, x[b*m.Cols:(b+1)*m.Cols]) + 1e-6
			if math.IsNaN(float64(g)) || math.Abs(float64(g-w)) > tol {
				t.Fatalf("%s: row %d output %d: %g, want %g (tolerance %.3g)", what, b, r, g, w, tol)
			}
		}
	}
}

func TestMatMulParity(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		f                 kernels.Format
		rows, cols, gs, n int
		offset            int
	}{
		{kernels.Int4Row, 64, 64, 0, 1, 0},
		{kernels.Int4Row, 37, 129, 0, 5, 1},
		{kernels.Int4Group, 100, 256, 64, 17, 3},
		{kernels.Int4Group, 130, 96, 32, 33, 0},
		{kernels.Int4Group, 65, 144, 48, 70, 2},
		{kernels.Int4Group, 300, 200, 16, 129, 5},
		{kernels.Int8Row, 33, 77, 0, 3, 1},
		{kernels.Int8Row, 1030, 64, 0, 140, 0},
		{kernels.F32, 19, 23, 0, 7, 0},
		{kernels.F32, 1100, 40, 0, 130, 0},
		// 16 MiB of weights: uploads split over several goroutines.
		{kernels.Int8Row, 4096, 4099, 0, 2, 3},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s_%dx%d_g%d_n%d_off%d", c.f, c.rows, c.cols, c.gs, c.n, c.offset)
		t.Run(name, func(t *testing.T) {
			m := randMatrix(r, c.f, c.rows, c.cols, c.gs, c.offset)
			x := randVec(r, c.n*c.cols)
			want := make([]float32, c.n*c.rows)
			kernels.MatMulRef(want, m, x, c.n)
			got := make([]float32, c.n*c.rows)
			for i := range got {
				got[i] = float32(math.NaN()) // every output must be written
			}
			if err := d.MatMul(got, m, x, c.n); err != nil {
				t.Fatal(err)
			}
			compareRows(t, "transient", got, want, m, x, c.n)
		})
	}
}

// A kept matrix (resident on the device, or in place on unified memory)
// gives the same products as an uploaded one, over several inputs.
func TestKeptMatMul(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(3, 4))
	ws := []*kernels.Matrix{
		randMatrix(r, kernels.Int4Group, 96, 128, 64, 7),
		randMatrix(r, kernels.Int4Row, 50, 63, 0, 1),
		randMatrix(r, kernels.Int8Row, 70, 63, 0, 0),
	}
	if err := d.Keep(ws...); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 9, 64} {
		x := randVec(r, n*ws[1].Cols)
		ys := [][]float32{make([]float32, n*50), make([]float32, n*70)}
		if err := d.MatMulMany(x, n, ws[1:], ys); err != nil {
			t.Fatal(err)
		}
		for i, w := range ws[1:] {
			want := make([]float32, n*w.Rows)
			kernels.MatMulRef(want, w, x, n)
			compareRows(t, fmt.Sprintf("kept %d n=%d", i, n), ys[i], want, w, x, n)
		}
		x = randVec(r, n*128)
		y := make([]float32, n*96)
		if err := d.MatMul(y, ws[0], x, n); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, n*96)
		kernels.MatMulRef(want, ws[0], x, n)
		compareRows(t, fmt.Sprintf("kept grouped n=%d", n), y, want, ws[0], x, n)
	}
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

func mlpRef(l *gpu.MLP, x []float32, n int) []float32 {
	inter, hidden := l.Gate.Rows, l.Gate.Cols
	g, u := make([]float32, n*inter), make([]float32, n*inter)
	kernels.MatMulRef(g, l.Gate, x, n)
	kernels.MatMulRef(u, l.Up, x, n)
	for i := range g {
		g[i] = silu(g[i]) * u[i]
	}
	y := make([]float32, n*hidden)
	kernels.MatMulRef(y, l.Down, g, n)
	return y
}

func randMLP(r *rand.Rand, f kernels.Format, hidden, inter, gs int) *gpu.MLP {
	return &gpu.MLP{
		Gate: randMatrix(r, f, inter, hidden, gs, 0),
		Up:   randMatrix(r, f, inter, hidden, gs, 0),
		Down: randMatrix(r, f, hidden, inter, gs, 0),
	}
}

// closeRel checks max |got - want| against a fraction of max |want|.
func closeRel(t *testing.T, what string, got, want []float32, rel float64) {
	t.Helper()
	var scale, worst float64
	at := 0
	for i := range want {
		scale = max(scale, math.Abs(float64(want[i])))
	}
	for i := range want {
		if math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: NaN at %d", what, i)
		}
		if d := math.Abs(float64(got[i] - want[i])); d > worst {
			worst, at = d, i
		}
	}
	if worst > rel*scale+1e-6 {
		t.Fatalf("%s: max difference %.3g at %d (%g vs %g), tolerance %.3g", what, worst, at, got[at], want[at], rel*scale)
	}
}

func TestMLPParity(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		f                 kernels.Format
		hidden, inter, gs int
		n                 int
	}{
		{kernels.Int4Row, 64, 32, 0, 3},
		{kernels.Int4Group, 256, 128, 64, 40},
		{kernels.Int8Row, 48, 80, 0, 17},
	} {
		l := randMLP(r, c.f, c.hidden, c.inter, c.gs)
		x := randVec(r, c.n*c.hidden)
		y := make([]float32, c.n*c.hidden)
		if err := d.MLP(y, l, x, c.n); err != nil {
			t.Fatal(err)
		}
		closeRel(t, fmt.Sprintf("MLP %s", c.f), y, mlpRef(l, x, c.n), 1e-5)
	}
}

// routeRef is the CPU router of engine/model.
func routeRef(l *gpu.MoE, x []float32, n int) ([]int32, []float32) {
	E, k := l.Router.Rows, l.TopK
	logits := make([]float32, n*E)
	kernels.MatMulRef(logits, l.Router, x, n)
	ids, ws := make([]int32, n*k), make([]float32, n*k)
	for i := 0; i < n; i++ {
		score, choice := make([]float32, E), make([]float32, E)
		for e := 0; e < E; e++ {
			score[e] = float32(1 / (1 + math.Exp(float64(-logits[i*E+e]))))
			choice[e] = score[e] + l.Bias[e]
		}
		taken := make([]bool, E)
		var sum float32
		for j := 0; j < k; j++ {
			best := -1
			for e := 0; e < E; e++ {
				if !taken[e] && (best < 0 || choice[e] > choice[best]) {
					best = e
				}
			}
			taken[best] = true
			ids[i*k+j] = int32(best)
			sum += score[best]
		}
		for j := 0; j < k; j++ {
			w := score[ids[i*k+j]]
			if l.Normalize {
				w /= sum + 1e-20
			}
			ws[i*k+j] = w * l.Scale
		}
	}
	return ids, ws
}

// delivery hands out experts in a random order, as a streamed source
// delivers hits before misses.
type delivery struct {
	experts  []gpu.MLP
	order    []int
	next     int
	done     []bool
	released bool
	// poison overwrites an expert's memory once it is Done, as a streamed
	// source may reuse it for a later expert: a backend that still reads
	// it gets NaNs.
	poison bool
}

func (d *delivery) Next() (int, gpu.MLP, error) {
	if d.next == len(d.order) {
		return 0, gpu.MLP{}, io.EOF
	}
	i := d.order[d.next]
	d.next++
	return i, d.experts[i], nil
}

func (d *delivery) Done(i int) {
	d.done[i] = true
	if !d.poison {
		return
	}
	for _, m := range []*kernels.Matrix{d.experts[i].Gate, d.experts[i].Up, d.experts[i].Down} {
		for j := range m.Data {
			m.Data[j] = 0x77
		}
		for j := range m.Scales {
			m.Scales[j] = float32(math.NaN())
		}
	}
}

// cloneMLP copies an expert's matrices (owned by a poisoning delivery).
func cloneMLP(e gpu.MLP) gpu.MLP {
	c := func(m *kernels.Matrix) *kernels.Matrix {
		n := *m
		n.Data = slices.Clone(m.Data)
		n.Scales = slices.Clone(m.Scales)
		n.F32 = slices.Clone(m.F32)
		return &n
	}
	return gpu.MLP{Gate: c(e.Gate), Up: c(e.Up), Down: c(e.Down)}
}
func (d *delivery) Release() { d.released = true }

type moeCase struct {
	E, k, hidden, inter, n, gs int
	f                          kernels.Format
	shared                     bool
}

func TestMoEParity(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []moeCase{
		{16, 8, 64, 32, 5, 0, kernels.Int4Row, true},
		{64, 8, 256, 128, 37, 64, kernels.Int4Group, true},
		{10, 3, 40, 24, 9, 0, kernels.Int8Row, false},
		// Experts of 12 MiB: the staging ring copies them on several threads.
		{4, 2, 4096, 1024, 3, 0, kernels.Int8Row, false},
		// Many rows per expert (a prompt segment): groups are cut at the
		// (row, slot) pairs their scratch holds, each row's sum built up
		// group by group.
		{16, 8, 64, 32, 600, 0, kernels.Int4Row, true},
	} {
		t.Run(fmt.Sprintf("E%d_k%d_%s_h%d", c.E, c.k, c.f, c.hidden), func(t *testing.T) { checkMoE(t, d, r, c) })
	}
}

// TestMoEDeliveryOrder: the experts applied in ascending order whatever
// order the source delivers them in, the output is bit-identical for any
// delivery order, also with groups cut short by their scratch.
func TestMoEDeliveryOrder(t *testing.T) {
	d := device(t)
	for _, c := range []moeCase{{16, 8, 64, 32, 600, 0, kernels.Int4Row, true}, {24, 4, 64, 48, 21, 32, kernels.Int4Group, false}} {
		r := rand.New(rand.NewPCG(21, 22))
		m := newMoELayer(r, c)
		x := randVec(r, c.n*c.hidden)
		var first []float32
		for run := range 3 {
			fetch := func(ids []int) (gpu.Experts, error) {
				del := &delivery{order: r.Perm(len(ids)), done: make([]bool, len(ids))}
				for _, e := range ids {
					del.experts = append(del.experts, m.experts[e])
				}
				return del, nil
			}
			y := make([]float32, c.n*c.hidden)
			if _, err := d.MoE(y, x, c.n, m.l, fetch); err != nil {
				t.Fatal(err)
			}
			if run == 0 {
				first = y
			} else if !slices.Equal(y, first) {
				t.Errorf("E%d n%d: delivery order %d changed the output", c.E, c.n, run)
			}
		}
	}
}

// A bank smaller than the layer's experts applies them in batches (the
// experts copied, as on a discrete device, even where they could be used
// in place).
func TestMoEBankBatches(t *testing.T) {
	device(t)
	c := moeCase{24, 4, 64, 48, 21, 32, kernels.Int4Group, true}
	one := int64(3 * (2*256 + ((48*64/2+4+255)/256)*256))
	d, err := gpu.Open(gpu.Options{Device: -1, BankBytes: 3 * one, CopyExperts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	checkMoE(t, d, rand.New(rand.NewPCG(11, 12)), c)
}

func checkMoE(t *testing.T, d *gpu.Device, r *rand.Rand, c moeCase) {
	t.Helper()
	checkMoEDelivery(t, d, r, c, false)
}

// attentionRef computes MLA attention the plain way: keys and values
// expanded per head through kv_b, float64 softmax.
func attentionRef(a *gpu.Attention) []float32 {
	S, nh, dn, dr, dv, rkv := len(a.Last), a.Heads, a.Nope, a.Rope, a.Value, a.Latent
	dq, wd := dn+dr, rkv+dr
	kvb := make([]float32, a.T*nh*(dn+dv))
	lat := make([]float32, a.T*rkv)
	for t := 0; t < a.T; t++ {
		copy(lat[t*rkv:(t+1)*rkv], a.Cache[t*wd:t*wd+rkv])
	}
	kernels.MatMulRef(kvb, a.KVB, lat, a.T)
	ctx := make([]float32, S*nh*dv)
	for s := 0; s < S; s++ {
		visible := a.Keys != nil && a.Keys[s] != nil
		for h := 0; h < nh; h++ {
			q := a.Q[(s*nh+h)*dq : (s*nh+h+1)*dq]
			sc := make([]float64, a.T)
			mx := math.Inf(-1)
			for t := 0; t < a.T; t++ {
				ok := t <= a.Last[s]
				if visible {
					ok = slices.Contains(a.Keys[s], int32(t))
				}
				if !ok {
					sc[t] = math.Inf(-1)
					continue
				}
				e := kvb[(t*nh+h)*(dn+dv):]
				var dot float64
				for i := 0; i < dn; i++ {
					dot += float64(q[i]) * float64(e[i])
				}
				for i := 0; i < dr; i++ {
					dot += float64(q[dn+i]) * float64(a.Cache[t*wd+rkv+i])
				}
				sc[t] = dot * float64(a.Scale)
				mx = max(mx, sc[t])
			}
			var sum float64
			for t := range sc {
				sc[t] = math.Exp(sc[t] - mx)
				sum += sc[t]
			}
			for i := 0; i < dv; i++ {
				var v float64
				for t := 0; t < a.T; t++ {
					v += sc[t] / sum * float64(kvb[(t*nh+h)*(dn+dv)+dn+i])
				}
				ctx[(s*nh+h)*dv+i] = float32(v)
			}
		}
	}
	out := make([]float32, S*a.O.Rows)
	kernels.MatMulRef(out, a.O, ctx, S)
	return out
}

// TestAttentionParity checks attention against the plain reference:
// causal rows, DSA rows with their selected keys gathered (of different
// lengths, so the shorter ones are padded) or masked over every key, rows
// of both kinds in one call, odd sizes, and a small score budget that
// splits the rows into many blocks.
func TestAttentionParity(t *testing.T) {
	d := device(t)
	small, err := gpu.Open(gpu.Options{Device: -1, ScoreBytes: 48 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct {
		heads, nope, rope, value, latent, hidden int
		T, S                                     int
		f                                        kernels.Format
		gs                                       int
		topk                                     int // > 0: DSA selections of up to topk keys for rows past it
		mask                                     bool
		small                                    bool
	}{
		{4, 16, 8, 16, 32, 64, 24, 24, kernels.Int4Row, 0, 0, false, false},
		{8, 32, 16, 32, 64, 256, 140, 136, kernels.Int4Group, 64, 0, false, false},
		{3, 8, 4, 12, 20, 30, 50, 7, kernels.Int4Row, 0, 12, false, false},
		{3, 8, 4, 12, 20, 30, 50, 7, kernels.Int4Row, 0, 12, true, false},
		{8, 32, 16, 32, 64, 256, 300, 300, kernels.Int4Group, 64, 96, false, false},
		{8, 32, 16, 32, 64, 256, 300, 300, kernels.Int4Group, 64, 96, true, false},
		{5, 24, 8, 20, 36, 70, 211, 97, kernels.Int8Row, 0, 33, false, true},
		{5, 24, 8, 20, 36, 70, 211, 97, kernels.Int8Row, 0, 0, false, true},
	} {
		t.Run(fmt.Sprintf("h%d_T%d_S%d_k%d_mask%v_small%v", c.heads, c.T, c.S, c.topk, c.mask, c.small), func(t *testing.T) {
			dq, wd := c.nope+c.rope, c.latent+c.rope
			a := &gpu.Attention{
				Q: randVec(r, c.S*c.heads*dq), Cache: randVec(r, c.T*wd), T: c.T,
				Heads: c.heads, Nope: c.nope, Rope: c.rope, Value: c.value, Latent: c.latent,
				Scale:    float32(1 / math.Sqrt(float64(dq))),
				KVB:      randMatrix(r, c.f, c.heads*(c.nope+c.value), c.latent, c.gs, 1),
				O:        randMatrix(r, c.f, c.hidden, c.heads*c.value, c.gs, 0),
				MaskKeys: c.mask,
			}
			for s := 0; s < c.S; s++ {
				last := c.T - c.S + s
				a.Last = append(a.Last, last)
				if c.topk > 0 {
					if a.Keys == nil {
						a.Keys = make([][]int32, c.S)
					}
					if last+1 > c.topk {
						n := c.topk - s%3 // rows of different lengths
						for _, k := range r.Perm(last + 1)[:n] {
							a.Keys[s] = append(a.Keys[s], int32(k))
						}
						slices.Sort(a.Keys[s])
					}
				}
			}
			dd := d
			if c.small {
				dd = small
			}
			out := make([]float32, c.S*c.hidden)
			if err := dd.Attention(out, a); err != nil {
				t.Fatal(err)
			}
			closeRel(t, "attention", out, attentionRef(a), 2e-5)

			// A bfloat16 cache is widened as it is uploaded: the result
			// is the float32 cache's of the same (rounded) values, bit
			// for bit.
			b16 := make([]uint16, len(a.Cache))
			for i, v := range a.Cache {
				b16[i] = uint16(math.Float32bits(v) >> 16) // truncated: any bfloat16 values do
				a.Cache[i] = math.Float32frombits(uint32(b16[i]) << 16)
			}
			if err := dd.Attention(out, a); err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(out)
			f32 := a.Cache
			a.Cache, a.CacheBF16 = nil, b16
			if err := dd.Attention(out, a); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out, want) {
				t.Error("attention over a bfloat16 cache differs from the same values in float32")
			}
			a.Cache = f32
			if err := dd.Attention(out, a); err == nil {
				t.Error("attention with the cache in both float32 and bfloat16 was accepted")
			}
			a.Cache = nil
		})
	}
}

func TestBadInput(t *testing.T) {
	d := device(t)
	m := &kernels.Matrix{Format: kernels.Int8Row, Rows: 4, Cols: 4, Data: make([]byte, 15), Scales: make([]float32, 4)}
	if err := d.MatMul(make([]float32, 4), m, make([]float32, 4), 1); err == nil {
		t.Error("a malformed matrix was accepted")
	}
	good := &kernels.Matrix{Format: kernels.Int8Row, Rows: 4, Cols: 4, Data: make([]byte, 16), Scales: make([]float32, 4)}
	if err := d.MatMul(make([]float32, 3), good, make([]float32, 4), 1); err == nil {
		t.Error("a short output was accepted")
	}
	a := &gpu.Attention{Heads: 1, Nope: 1, Value: 1, Latent: 1, KVB: good, O: good, T: 1, Last: []int{3}}
	if err := d.Attention(make([]float32, 4), a); err == nil {
		t.Error("attention past the cache was accepted")
	}
}
