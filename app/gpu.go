package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/kernels/gpu"
)

// GPU modes of --gpu.
const (
	gpuAuto = "auto" // a GPU (not a CPU Vulkan device) whose memory holds the GPU plan
	gpuOn   = "on"   // any Vulkan device, a CPU implementation too (lavapipe)
	gpuOff  = "off"
)

// gpuFlag is --gpu, shared by run, serve and app.
type gpuFlag struct{ mode string }

func (g *gpuFlag) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.mode, "gpu", gpuAuto, `prefill on the GPU through Vulkan: auto (a GPU whose memory holds the plan), on (any Vulkan device, CPU ones too), off`)
}

// check validates the mode ("" is auto).
func (g *gpuFlag) check() (string, error) {
	switch g.mode {
	case "", gpuAuto:
		return gpuAuto, nil
	case gpuOn, gpuOff:
		return g.mode, nil
	}
	return "", fmt.Errorf("--gpu must be auto, on or off, not %q", g.mode)
}

// gpuStatus is what `spool inspect`, /stats and the UI show about the GPU.
type gpuStatus struct {
	Mode string `json:"mode"`
	// Active reports that prefill chunks run on the device.
	Active bool      `json:"active"`
	Device *gpu.Info `json:"device,omitempty"`
	// Reason says why the GPU is not used, or why it stopped being used.
	Reason string        `json:"reason,omitempty"`
	Plan   *plan.GPUPlan `json:"plan,omitempty"`
}

// gpuBackend is a run's GPU: the open device (nil when not used) and its
// status. It is safe for concurrent use (the status changes when a
// failing device falls back to the CPU during a forward).
//
// It logs a line when prefill runs on the GPU, and when it does not
// although a GPU was asked for (--gpu on) or found (it failed or its
// memory is too small). In auto mode a machine without a usable GPU (no
// Vulkan device, a build without the backend, a CPU implementation of
// Vulkan) runs on the CPU quietly; the status says why.
type gpuBackend struct {
	log io.Writer
	// found is set once a usable device was opened.
	found bool

	mu     sync.Mutex
	dev    *gpu.Device
	status gpuStatus
}

// openGPU opens the Vulkan device for mode. Any failure leaves the
// backend unused, with the reason in its status.
func openGPU(mode string, log io.Writer) *gpuBackend {
	return openGPUWith(mode, log, gpu.Options{Device: -1})
}

// openGPUWith is openGPU with the device's options.
func openGPUWith(mode string, log io.Writer, opts gpu.Options) *gpuBackend {
	g := &gpuBackend{log: log, status: gpuStatus{Mode: mode}}
	if mode == gpuOff {
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
	if mode == gpuAuto && info.Type == "cpu" {
		dev.Close()
		g.status.Reason = fmt.Sprintf("%s is a CPU implementation of Vulkan, slower than the CPU kernels (--gpu on uses it)", info.Name)
		return g
	}
	g.dev, g.found = dev, true
	return g
}

// device is what the memory plan needs to know of the open device (nil
// when the GPU is not used): its lines go into the plan (plan.Plan.GPU),
// sized for the plan's own prefill chunk.
func (g *gpuBackend) device() *plan.GPUDevice {
	if g.dev == nil {
		return nil
	}
	info := g.dev.Info()
	return &plan.GPUDevice{Unified: info.Unified, InPlace: info.InPlace, Memory: info.DeviceMemory}
}

// plan plans the run with the device's GPU lines (planFor is called with
// the device, or nil for the CPU). A plan that does not fit with them
// drops the GPU, saying why, and is made again for the CPU.
func (g *gpuBackend) plan(planFor func(*plan.GPUDevice) (*plan.Plan, error)) (*plan.Plan, error) {
	dev := g.device()
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

// attach gives m the device as its backend when the plan's GPU lines fit
// it, or says why not and stops using the device. p is the run's plan,
// made with device().
func (g *gpuBackend) attach(m *model.Model, p *plan.Plan) {
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
func (g *gpuBackend) misfit(p *plan.Plan) string {
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
func (g *gpuBackend) drop(reason string) {
	g.mu.Lock()
	g.status.Active = false
	g.status.Reason = reason
	g.mu.Unlock()
	g.report()
}

func (g *gpuBackend) report() {
	if g.log == nil {
		return
	}
	st := g.Status()
	switch {
	case st.Active:
		fmt.Fprintf(g.log, "gpu: prefill on %s\n", st.Device)
	case st.Mode == gpuOff, st.Mode == gpuAuto && !g.found:
	default:
		fmt.Fprintf(g.log, "gpu: not used (%s); prefill runs on the CPU\n", st.Reason)
	}
}

// Status is the GPU's current status.
func (g *gpuBackend) Status() gpuStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status
}

// times returns where the device's operations spent their time so far
// (zero when the GPU is not used or g is nil).
func (g *gpuBackend) times() gpu.Times {
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

// Close closes the device; call it after the model's last forward.
func (g *gpuBackend) Close() {
	g.mu.Lock()
	dev := g.dev
	g.dev = nil
	g.mu.Unlock()
	if dev != nil {
		dev.Close()
	}
}

// inspectGPU says which device prefill of the model would run on and its
// GPU lines in the plan of the default context on this machine, without
// loading the model.
func inspectGPU(mode string, cfg *config.Config, w plan.Weights) gpuStatus {
	g := openGPU(mode, nil)
	defer g.Close()
	if g.dev == nil {
		return g.Status()
	}
	p, err := plan.New(cfg, w, plan.Options{
		MachineMemory: machineMemory, Threads: runtime.GOMAXPROCS(0),
		Context: min(plan.DefaultContext, cfg.MaxPositionEmbeddings), GPU: g.device(),
	})
	st := g.Status()
	if err != nil {
		st.Reason = err.Error()
		return st
	}
	if reason := g.misfit(p); reason != "" {
		st = g.Status()
		st.Reason = reason
		return st
	}
	st = g.Status()
	st.Active = true
	return st
}

// printInspectGPU is the GPU line of spool inspect.
func printInspectGPU(out io.Writer, st gpuStatus) error {
	if !st.Active {
		_, err := fmt.Fprintf(out, "gpu: not used (%s); prefill runs on the CPU\n", st.Reason)
		return err
	}
	var parts []string
	for _, it := range st.Plan.Items {
		parts = append(parts, fmt.Sprintf("%s %s", it.Name, plan.SizeText(it.Bytes)))
	}
	where := "device memory"
	if st.Device.Unified {
		where = "memory shared with the host, in the process plan"
	}
	_, err := fmt.Fprintf(out, "gpu: prefill on %s; GPU plan %s of %s (%s)\n", st.Device, plan.SizeText(st.Plan.DeviceBytes), where, strings.Join(parts, ", "))
	return err
}
