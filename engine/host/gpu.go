package host

import (
	"errors"
	"fmt"
	"io"
	"log"
	"runtime"
	"sync"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/kernels/gpu"
)

// GPU modes of --gpu.
const (
	GPUAuto = "auto" // a GPU (not a CPU Vulkan device) whose memory holds the GPU plan
	GPUOn   = "on"   // any Vulkan device, a CPU implementation too (lavapipe)
	GPUOff  = "off"
)

// CheckGPUMode validates a --gpu mode ("" is auto).
func CheckGPUMode(mode string) (string, error) {
	switch mode {
	case "", GPUAuto:
		return GPUAuto, nil
	case GPUOn, GPUOff:
		return mode, nil
	}
	return "", fmt.Errorf("--gpu must be auto, on or off, not %q", mode)
}

// GPUStatus is what `spool inspect`, /stats and the UI show about the GPU.
type GPUStatus struct {
	Mode string `json:"mode"`
	// Active reports that prefill chunks run on the device.
	Active bool      `json:"active"`
	Device *gpu.Info `json:"device,omitempty"`
	// Reason says why the GPU is not used, or why it stopped being used.
	Reason string        `json:"reason,omitempty"`
	Plan   *plan.GPUPlan `json:"plan,omitempty"`
}

// GPU is a run's GPU: the open device (nil when not used) and its
// status. It is safe for concurrent use (the status changes when a
// failing device falls back to the CPU during a forward).
//
// It logs a line when prefill runs on the GPU, and when it does not
// although a GPU was asked for (--gpu on) or found (it failed or its
// memory is too small). In auto mode a machine without a usable GPU (no
// Vulkan device, a build without the backend, a CPU implementation of
// Vulkan) runs on the CPU quietly; the status says why.
type GPU struct {
	log io.Writer
	// found is set once a usable device was opened.
	found bool

	mu     sync.Mutex
	dev    *gpu.Device
	status GPUStatus
}

// openGPU opens the Vulkan device of cfg's engine in mode.
func openGPU(mode string, cfg Config) *GPU {
	w := cfg.Log
	if w == nil {
		w = log.Writer()
	}
	return OpenGPU(mode, w, gpuOptions(cfg))
}

// gpuOptions are the device options of cfg's engine.
func gpuOptions(cfg Config) gpu.Options {
	return gpu.Options{Device: -1, CopyExperts: cfg.GPUCopyExperts}
}

// OpenGPU opens the Vulkan device for mode with opts. Any failure leaves
// the backend unused, with the reason in its status.
func OpenGPU(mode string, log io.Writer, opts gpu.Options) *GPU {
	g := &GPU{log: log, status: GPUStatus{Mode: mode}}
	if mode == GPUOff {
		g.status.Reason = "--gpu off"
		return g
	}
	dev, err := gpu.Open(opts)
	if err != nil {
		g.status.Reason = err.Error()
		if errors.Is(err, gpu.ErrUnavailable) {
			g.status.Reason = "this build has no GPU backend"
		}
		return g
	}
	info := dev.Info()
	g.status.Device = &info
	if mode == GPUAuto && info.Type == "cpu" {
		dev.Close()
		g.status.Reason = fmt.Sprintf("%s is a CPU implementation of Vulkan, slower than the CPU kernels (--gpu on uses it)", info.Name)
		return g
	}
	g.dev, g.found = dev, true
	return g
}

// Device is what the memory plan needs to know of the open device (nil
// when the GPU is not used): its lines go into the plan (plan.Plan.GPU),
// sized for the plan's own prefill chunk.
func (g *GPU) Device() *plan.GPUDevice {
	if g.dev == nil {
		return nil
	}
	info := g.dev.Info()
	return &plan.GPUDevice{Unified: info.Unified, InPlace: info.InPlace, Memory: info.DeviceMemory}
}

// Plan plans the run with the device's GPU lines (planFor is called with
// the device, or nil for the CPU). A plan that does not fit with them
// drops the GPU, saying why, and is made again for the CPU.
func (g *GPU) Plan(planFor func(*plan.GPUDevice) (*plan.Plan, error)) (*plan.Plan, error) {
	dev := g.Device()
	p, err := planFor(dev)
	if err == nil || dev == nil {
		return p, err
	}
	var fit *plan.FitError
	if !errors.As(err, &fit) {
		return nil, err
	}
	g.Close()
	g.drop("the memory plan with the GPU lines does not fit: " + fit.Plan.Problem)
	return planFor(nil)
}

// Attach gives m the device as its backend when the plan's GPU lines fit
// it, or says why not and stops using the device. p is the run's plan,
// made with device().
func (g *GPU) Attach(m *model.Model, p *plan.Plan) {
	if g.dev == nil {
		g.report()
		return
	}
	if reason := g.misfit(p); reason != "" {
		g.drop(reason)
		return
	}
	g.dev.SetLimits(p.GPU.DeviceBytes, p.GPU.BankBytes)
	g.dev.SetResidentExperts(p.GPU.ResidentExpertBytes)
	err := m.SetBackend(g.dev, model.BackendOptions{OnFallback: func(err error) { g.drop("failed: " + err.Error()) }})
	if err != nil {
		g.drop(err.Error())
		return
	}
	g.mu.Lock()
	g.status.Active = true
	g.mu.Unlock()
	g.report()
}

// misfit records p's GPU lines in the status and says why they do not fit
// the device ("" when they do). On unified memory the process plan
// decides, with the GPU lines in it.
func (g *GPU) misfit(p *plan.Plan) string {
	g.mu.Lock()
	g.status.Plan = p.GPU
	g.mu.Unlock()
	switch {
	case p.GPU == nil:
		return "the memory plan has no GPU lines"
	case !p.GPU.Fits:
		return p.GPU.Problem
	case p.GPU.Unified && !p.Fits:
		return "the memory plan with the GPU lines does not fit"
	}
	return ""
}

// drop stops using the device, logging why. The device stays open until
// Close: a model that fell back mid-forward no longer calls it.
func (g *GPU) drop(reason string) {
	g.mu.Lock()
	g.status.Active = false
	g.status.Reason = reason
	g.mu.Unlock()
	g.report()
}

func (g *GPU) report() {
	if g.log == nil {
		return
	}
	st := g.Status()
	switch {
	case st.Active:
		fmt.Fprintf(g.log, "gpu: prefill on %s\n", st.Device)
	case st.Mode == GPUOff, st.Mode == GPUAuto && !g.found:
	default:
		fmt.Fprintf(g.log, "gpu: not used (%s); prefill runs on the CPU\n", st.Reason)
	}
}

// Status is the GPU's current status.
func (g *GPU) Status() GPUStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status
}

// Times returns where the device's operations spent their time so far
// (zero when the GPU is not used or g is nil).
func (g *GPU) Times() gpu.Times {
	if g == nil {
		return gpu.Times{}
	}
	g.mu.Lock()
	dev := g.dev
	g.mu.Unlock()
	if dev == nil {
		return gpu.Times{}
	}
	return dev.Times()
}

func (g *GPU) close() error {
	g.Close()
	return nil
}

// Close closes the device; call it after the model's last forward.
func (g *GPU) Close() {
	g.mu.Lock()
	dev := g.dev
	g.dev = nil
	g.mu.Unlock()
	if dev != nil {
		dev.Close()
	}
}

// InspectGPU says which device prefill of the model would run on and its
// GPU lines in the plan of the default context on this machine, without
// loading the model.
func InspectGPU(mode string, cfg *config.Config, w plan.Weights) GPUStatus {
	g := OpenGPU(mode, nil, gpu.Options{Device: -1})
	defer g.Close()
	if g.dev == nil {
		return g.Status()
	}
	p, err := plan.New(cfg, w, plan.Options{
		MachineMemory: MachineMemory, Threads: runtime.GOMAXPROCS(0),
		Context: min(plan.DefaultContext, cfg.MaxPositionEmbeddings), GPU: g.Device(),
	})
	if err != nil {
		st := g.Status()
		st.Reason = err.Error()
		return st
	}
	return g.preview(p)
}

// preview is the status Attach would give a model planned with p, without
// one: the device used when p's GPU lines fit it.
func (g *GPU) preview(p *plan.Plan) GPUStatus {
	if g.dev == nil {
		return g.Status()
	}
	if reason := g.misfit(p); reason != "" {
		st := g.Status()
		st.Reason = reason
		return st
	}
	st := g.Status()
	st.Active = true
	return st
}
