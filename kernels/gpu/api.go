package gpu

import (
	"errors"
	"fmt"

	"github.com/spoolhq/spool/internal/bytesize"
	"github.com/spoolhq/spool/kernels"
)

// ErrUnavailable is returned by Open in a build without the Vulkan backend.
var ErrUnavailable = errors.New("gpu: this binary was built without the Vulkan backend (build tag vulkan)")

// Options configure Open.
type Options struct {
	// Loader is the Vulkan loader library to open; empty tries
	// $SPOOL_VULKAN_LOADER, the app bundle's Frameworks (macOS) and the
	// system's libvulkan.
	Loader string
	// Device is the physical device index; negative picks the best one
	// (discrete, then integrated, then virtual, then a CPU device).
	Device int
	// Budget bounds the device memory the backend allocates for weights,
	// the expert bank and working buffers; 0 allows the device's largest
	// device-local heap. An operation that would exceed it fails.
	Budget int64
	// ScoreBytes bounds the attention score block (default 256 MiB).
	ScoreBytes int64
	// BankBytes bounds the expert bank, the routed experts copied in for
	// two groups (0: what the budget and one binding allow).
	BankBytes int64
	// CopyExperts copies routed experts into the bank even where the
	// device could read them in place (Info.InPlace): for tests of the
	// copying path on such a device, and to compare the two.
	CopyExperts bool
	// StageExperts copies routed experts into the bank through the
	// staging ring even where the bank can be device memory the host
	// writes directly (host-visible device-local memory, resizable BAR):
	// for tests of the ring's path.
	StageExperts bool
	// ResidentExpertBytes keeps the most used routed experts in device
	// memory between forwards, up to this many bytes (0: none): they are
	// applied from there with no copy. Where experts are used in place
	// (Info.InPlace) it is not needed. The MoE layers passed to MoE must
	// then stay valid for the device's lifetime (they name the layers).
	ResidentExpertBytes int64
	// Tile fixes the matrix-product tile (outputs x rows: 64x16, 64x32,
	// 64x64, 128x64 or 128x128) and TileK its depth (16 or 32) instead of
	// the defaults; for benchmarks that compare them.
	Tile  [2]int
	TileK int
}

// Info describes the device in use.
type Info struct {
	Name       string `json:"name"`
	Driver     string `json:"driver,omitempty"`
	Type       string `json:"type"` // discrete, integrated, virtual, cpu, other
	API        string `json:"api"`  // Vulkan version
	VendorID   uint32 `json:"vendor_id"`
	Unified    bool   `json:"unified"`     // device memory is host memory
	HostImport bool   `json:"host_import"` // VK_EXT_external_memory_host
	// InPlace reports that resident weights and routed experts are used
	// where they lie in host memory (unified memory with host import)
	// rather than copied.
	InPlace         bool   `json:"in_place"`
	Portability     bool   `json:"portability"` // a portability driver (MoltenVK)
	DeviceMemory    int64  `json:"device_memory_bytes"`
	MaxBufferRange  int64  `json:"max_buffer_range"`
	Devices         int    `json:"devices"`
	Index           int    `json:"index"`
	ImportAlignment int64  `json:"import_alignment,omitempty"`
	Loader          string `json:"loader"`
}

func (i Info) String() string {
	return fmt.Sprintf("%s (%s, Vulkan %s, %s)", i.Name, i.Type, i.API, memText(i.DeviceMemory))
}

func memText(n int64) string { return bytesize.IEC(n) }

// MLP is a gated SiLU MLP: down(silu(gate x) * up x).
type MLP struct {
	Gate, Up, Down *kernels.Matrix
}

// MoE is a mixture-of-experts layer's resident part.
type MoE struct {
	Router    *kernels.Matrix // [experts, hidden], f32
	Bias      []float32       // selection bias per expert
	TopK      int
	Normalize bool    // divide the chosen scores by their sum
	Scale     float32 // routed scaling factor
	Shared    *MLP    // shared experts fused into one MLP, or nil
}

// Routes are the router's choices for n rows: IDs[r*k+j] is row r's j-th
// expert in selection order and Weights[r*k+j] its final weight.
type Routes struct {
	IDs     []int32
	Weights []float32
}

// Experts delivers routed experts as they become ready (an
// experts.Lease): Next returns the index into the ids asked for and the
// expert's matrices, then io.EOF after the last; Done says the backend has
// its own copy of expert index or is done with it; Release ends the
// delivery.
type Experts interface {
	Next() (index int, e MLP, err error)
	Done(index int)
	Release()
}

// Fetch starts delivering the routed experts ids (unique, ascending).
type Fetch func(ids []int) (Experts, error)

// Attention is one sequence's MLA attention for a run of query rows over
// the compressed cache (DeepSeek MLA with the latent absorbed: every head
// scores the cached [latent | rope key] rows directly).
type Attention struct {
	// Q holds the query rows: [rows][Heads][Nope+Rope], RoPE applied.
	Q []float32
	// Cache holds the first T cache entries: [T][Latent+Rope], the
	// normalized latent and the roped shared key; CacheBF16 holds them
	// instead in bfloat16 (a bfloat16 KV cache), widened as they are
	// uploaded.
	Cache     []float32
	CacheBF16 []uint16
	T         int
	// Geometry.
	Heads, Nope, Rope, Value, Latent int
	// Scale multiplies the raw scores (softmax scale).
	Scale float32
	// KVB is kv_b_proj [Heads*(Nope+Value), Latent] and O is o_proj
	// [hidden, Heads*Value].
	KVB, O *kernels.Matrix
	// Last[s] is the last cache entry query row s sees (causal attention)
	// where Keys is nil or Keys[s] is nil; Keys[s] lists the entries of a
	// DSA selection, ascending. A selected row scores only its listed
	// entries, gathered from the cache, so its work does not grow with the
	// context.
	Last []int
	Keys [][]int32
	// MaskKeys makes selected rows score every entry up to Last[s] and
	// mask the unlisted ones instead of gathering them: the same result,
	// the baseline sparse attention is measured against
	// (model.Options.ComputeAllKeys).
	MaskKeys bool
}

func (a *Attention) check(out []float32) error {
	S := len(a.Last)
	dq, w := a.Nope+a.Rope, a.Latent+a.Rope
	switch {
	case S == 0:
		return errors.New("gpu: attention without query rows")
	case a.Heads <= 0 || a.Nope <= 0 || a.Rope < 0 || a.Value <= 0 || a.Latent <= 0:
		return fmt.Errorf("gpu: attention geometry heads %d nope %d rope %d value %d latent %d", a.Heads, a.Nope, a.Rope, a.Value, a.Latent)
	case a.KVB == nil || a.O == nil:
		return errors.New("gpu: attention without kv_b or o_proj")
	case a.KVB.Rows != a.Heads*(a.Nope+a.Value) || a.KVB.Cols != a.Latent:
		return fmt.Errorf("gpu: kv_b is [%d, %d], want [%d, %d]", a.KVB.Rows, a.KVB.Cols, a.Heads*(a.Nope+a.Value), a.Latent)
	case a.O.Cols != a.Heads*a.Value:
		return fmt.Errorf("gpu: o_proj has %d columns, want %d", a.O.Cols, a.Heads*a.Value)
	case len(a.Q) < S*a.Heads*dq:
		return fmt.Errorf("gpu: %d query values for %d rows of %d heads x %d", len(a.Q), S, a.Heads, dq)
	case (a.Cache == nil) == (a.CacheBF16 == nil):
		return errors.New("gpu: attention needs the cache in float32 or in bfloat16")
	case a.T <= 0 || len(a.Cache)+len(a.CacheBF16) < a.T*w:
		return fmt.Errorf("gpu: %d cache values for %d entries of %d", len(a.Cache)+len(a.CacheBF16), a.T, w)
	case len(out) < S*a.O.Rows:
		return fmt.Errorf("gpu: attention output of %d values for %d rows of %d", len(out), S, a.O.Rows)
	case a.Keys != nil && len(a.Keys) != S:
		return fmt.Errorf("gpu: %d selections for %d rows", len(a.Keys), S)
	}
	for s, last := range a.Last {
		if last < 0 || last >= a.T {
			return fmt.Errorf("gpu: row %d sees entry %d of %d", s, last, a.T)
		}
		if a.Keys == nil || a.Keys[s] == nil {
			continue
		}
		prev := -1
		for _, k := range a.Keys[s] {
			t := int(k)
			if t <= prev || t > last {
				return fmt.Errorf("gpu: row %d selects entry %d out of order (after %d) or past its last entry %d", s, t, prev, last)
			}
			prev = t
		}
		if prev < 0 {
			return fmt.Errorf("gpu: row %d has an empty selection", s)
		}
	}
	return nil
}

func checkMatMul(y []float32, m *kernels.Matrix, x []float32, n int) error {
	if m == nil {
		return errors.New("gpu: no matrix")
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if len(x) < n*m.Cols || len(y) < n*m.Rows {
		return fmt.Errorf("gpu: product of [%d, %d] over %d rows needs x of %d and y of %d values, have %d and %d",
			m.Rows, m.Cols, n, n*m.Cols, n*m.Rows, len(x), len(y))
	}
	return nil
}

func (l *MLP) check() error {
	if l == nil || l.Gate == nil || l.Up == nil || l.Down == nil {
		return errors.New("gpu: incomplete MLP")
	}
	for _, m := range []*kernels.Matrix{l.Gate, l.Up, l.Down} {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("gpu: %w", err)
		}
	}
	if l.Up.Rows != l.Gate.Rows || l.Up.Cols != l.Gate.Cols || l.Down.Cols != l.Gate.Rows || l.Down.Rows != l.Gate.Cols {
		return fmt.Errorf("gpu: MLP shapes gate [%d, %d], up [%d, %d], down [%d, %d] do not chain",
			l.Gate.Rows, l.Gate.Cols, l.Up.Rows, l.Up.Cols, l.Down.Rows, l.Down.Cols)
	}
	return nil
}

// Times is where a device's operations spent their wall time since Open
// (Device.Times), for benchmarks that say how much of a prefill waits on
// the GPU and how much moves data.
type Times struct {
	// Ops is the time inside MatMulMany, MLP, MoE and Attention, the parts
	// below included (expert delivery too).
	Ops float64 `json:"ops_seconds"`
	// Stage is copying inputs into staging memory, Run submitting recorded
	// work and waiting for it, Readback copying results out of staging
	// memory.
	Stage    float64 `json:"stage_seconds"`
	Run      float64 `json:"run_seconds"`
	Readback float64 `json:"readback_seconds"`
	// RunBy is Run by operation: matmul (MatMul, MatMulMany), mlp, moe,
	// attention.
	RunBy map[string]float64 `json:"run_by_op_seconds,omitempty"`
	// Experts is copying routed experts into the bank (through the staging
	// ring, with its waits), or binding them in place; Deliver is waiting
	// for the experts' source.
	Experts float64 `json:"experts_seconds"`
	Deliver float64 `json:"deliver_seconds"`
	// CopyWait is the part of Experts the device did not hide: copying
	// while no computation was running on it (the first group of each
	// layer, copies that outlast the products before them). Copies that
	// overlap the previous group's products are not counted.
	CopyWait float64 `json:"copy_wait_seconds"`
	// Routed experts applied, by where they came from: copied into the
	// bank, resident in device memory, bound in place in host memory.
	ExpertsCopied   int64 `json:"experts_copied"`
	ExpertsResident int64 `json:"experts_resident"`
	ExpertsInPlace  int64 `json:"experts_in_place"`
	// RingCopy and RingWait are the staging ring's share of Experts (and
	// of Keep): copying into its memory, and waiting for its device
	// copies to free a half.
	RingCopy float64 `json:"ring_copy_seconds"`
	RingWait float64 `json:"ring_wait_seconds"`
	// Submits counts the submissions waited for.
	Submits int64 `json:"submits"`
}

// Sub returns the times spent between u and t (t taken later).
func (t Times) Sub(u Times) Times {
	d := Times{Ops: t.Ops - u.Ops, Stage: t.Stage - u.Stage, Run: t.Run - u.Run, Readback: t.Readback - u.Readback,
		Experts: t.Experts - u.Experts, Deliver: t.Deliver - u.Deliver, CopyWait: t.CopyWait - u.CopyWait,
		ExpertsCopied: t.ExpertsCopied - u.ExpertsCopied, ExpertsResident: t.ExpertsResident - u.ExpertsResident, ExpertsInPlace: t.ExpertsInPlace - u.ExpertsInPlace, RingCopy: t.RingCopy - u.RingCopy, RingWait: t.RingWait - u.RingWait,
		Submits: t.Submits - u.Submits, RunBy: map[string]float64{}}
	for k, v := range t.RunBy {
		d.RunBy[k] = v - u.RunBy[k]
	}
	return d
}
