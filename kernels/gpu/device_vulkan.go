//go:build vulkan && cgo

package gpu

/*
#cgo CFLAGS: -O2
#cgo linux LDFLAGS: -ldl -lpthread
#cgo darwin CFLAGS: -I/opt/homebrew/include -I/usr/local/include
#include <stdlib.h>
#include "vk.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/spoolhq/spool/kernels"
)

// align is the offset granule of every sub-allocation and binding: at
// least minStorageBufferOffsetAlignment on every driver we know (16 to 256).
const align = 256

const defaultScoreBytes = 256 << 20

// Device is an open Vulkan device with the backend's pipelines, resident
// weights and working buffers. Its methods are safe for concurrent use;
// they run one at a time.
type Device struct {
	mu   sync.Mutex
	v    *C.spool_vk
	info Info

	budget, used int64
	scoreBytes   int64
	bankBytes    int64
	copyExperts  bool // Options.CopyExperts
	stageExperts bool // Options.StageExperts
	resident     residentStore

	pipes    map[pipeKey]C.int
	kept     map[weightKey]*placed // resident weights (Keep)
	arenas   []*arena
	imports  []hostImport           // host ranges imported in place
	importAt map[uintptr]hostImport // the largest import starting at each page

	work         *buffer // device scratch of the running operation
	up, down     *buffer // host-visible staging of activations
	bank         *buffer // routed experts of two groups (halves)
	dummy        *buffer
	maxRange     int64
	storageAlign int64
	tileK        uint32    // gemm reduction depth per tile
	tileFixed    [2]uint32 // a fixed tile (Options.Tile), or zeros

	times Times // guarded by mu
	// running names the operation in progress, for Times.RunBy.
	running string
}

// buffer is a Vulkan buffer and, for host-visible ones, its mapping.
type buffer struct {
	b      *C.spool_vk_buffer
	size   int64
	mapped unsafe.Pointer
	device bool // counted against the budget
}

// arena is a device buffer that resident weights are bump-allocated from.
type arena struct {
	buf  *buffer
	next int64
}

func loaderCandidates(explicit string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	var out []string
	if env := os.Getenv("SPOOL_VULKAN_LOADER"); env != "" {
		out = append(out, env)
	}
	if runtime.GOOS == "darwin" {
		if exe, err := os.Executable(); err == nil {
			out = append(out, filepath.Join(filepath.Dir(exe), "..", "Frameworks", "libvulkan.1.dylib"))
		}
		return append(out, "libvulkan.1.dylib", "/opt/homebrew/lib/libvulkan.1.dylib", "/usr/local/lib/libvulkan.1.dylib")
	}
	return append(out, "libvulkan.so.1")
}

// Open opens a Vulkan device and builds the backend's pipelines.
func Open(opts Options) (*Device, error) {
	var errs []error
	for _, lib := range loaderCandidates(opts.Loader) {
		d, err := open(lib, opts)
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func open(lib string, opts Options) (*Device, error) {
	clib := C.CString(lib)
	defer C.free(unsafe.Pointer(clib))
	var errbuf [512]C.char
	var v *C.spool_vk
	if rc := C.spool_vk_open(clib, C.int(opts.Device), &v, &errbuf[0], C.size_t(len(errbuf))); rc != 0 {
		return nil, fmt.Errorf("gpu: %s: %s", lib, C.GoString(&errbuf[0]))
	}
	var ci C.spool_vk_info
	C.spool_vk_get_info(v, &ci)
	info := Info{
		Name:            C.GoString(&ci.name[0]),
		Driver:          C.GoString(&ci.driver[0]),
		Type:            deviceType(int(ci.device_type)),
		API:             fmt.Sprintf("%d.%d.%d", ci.api_version>>22, (ci.api_version>>12)&0x3ff, ci.api_version&0xfff),
		VendorID:        uint32(ci.vendor_id),
		Unified:         ci.unified != 0,
		HostImport:      ci.host_import != 0,
		Portability:     ci.portability != 0,
		DeviceMemory:    int64(ci.device_local_bytes),
		MaxBufferRange:  int64(ci.max_storage_range),
		Devices:         int(ci.devices),
		Index:           int(ci.index),
		ImportAlignment: int64(ci.import_align),
		Loader:          lib,
	}
	info.InPlace = info.Unified && info.HostImport
	d := &Device{
		v:            v,
		info:         info,
		budget:       opts.Budget,
		scoreBytes:   opts.ScoreBytes,
		bankBytes:    opts.BankBytes,
		copyExperts:  opts.CopyExperts,
		stageExperts: opts.StageExperts,
		resident:     residentStore{limit: opts.ResidentExpertBytes},
		pipes:        map[pipeKey]C.int{},
		kept:         map[weightKey]*placed{},
		maxRange:     min(int64(ci.max_storage_range), 1<<32-1),
		storageAlign: int64(ci.storage_align),
		tileK:        16,
	}
	if opts.TileK != 0 || opts.Tile != [2]int{} {
		if err := d.setTile(opts.Tile, opts.TileK); err != nil {
			d.Close()
			return nil, err
		}
	}
	if d.budget <= 0 {
		d.budget = info.DeviceMemory
	}
	if d.scoreBytes <= 0 {
		d.scoreBytes = defaultScoreBytes
	}
	switch {
	case ci.max_invocations < 256:
		d.Close()
		return nil, fmt.Errorf("gpu: %s runs %d invocations per workgroup, the kernels need 256", info.Name, ci.max_invocations)
	case ci.max_shared < 16<<10:
		d.Close()
		return nil, fmt.Errorf("gpu: %s has %d bytes of shared memory, the kernels need 16 KiB", info.Name, ci.max_shared)
	case d.storageAlign > align:
		d.Close()
		return nil, fmt.Errorf("gpu: %s aligns storage buffers to %d bytes, more than %d", info.Name, d.storageAlign, align)
	}
	var err error
	if d.dummy, err = d.newBuffer(align, C.SPOOL_MEM_DEVICE); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func deviceType(t int) string {
	switch t {
	case 1:
		return "integrated"
	case 2:
		return "discrete"
	case 3:
		return "virtual"
	case 4:
		return "cpu"
	}
	return "other"
}

// Info describes the device.
func (d *Device) Info() Info { return d.info }

// Times returns where the device's operations spent their time so far.
func (d *Device) Times() Times {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.times
	t.RunBy = maps.Clone(d.times.RunBy)
	if d.v != nil {
		var cp, wait C.uint64_t
		C.spool_vk_stage_times(d.v, &cp, &wait)
		t.RingCopy, t.RingWait = float64(cp)/1e9, float64(wait)/1e9
	}
	return t
}

// addTime adds the time since t0 to *f (one of d.times, mu held).
func addTime(f *float64, t0 time.Time) { *f += time.Since(t0).Seconds() }

// timeRun adds the time since t0 to Times.Run and to the running
// operation's share, and counts a submission (mu held).
func (d *Device) timeRun(t0 time.Time) {
	s := time.Since(t0).Seconds()
	d.times.Run += s
	d.times.Submits++
	if d.times.RunBy == nil {
		d.times.RunBy = map[string]float64{}
	}
	d.times.RunBy[d.running] += s
}

// timeOp starts timing operation name (mu held): it returns what adds
// its time to Times.Ops when the operation ends.
func (d *Device) timeOp(name string) func() {
	t0 := time.Now()
	d.running = name
	return func() {
		addTime(&d.times.Ops, t0)
		d.running = ""
	}
}

// Close releases everything the device holds. Weights registered with
// Keep must outlive the device or be forgotten by closing it first.
func (d *Device) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.v == nil {
		return
	}
	for _, b := range []*buffer{d.work, d.up, d.down, d.bank, d.dummy} {
		d.freeBuffer(b)
	}
	d.freeResident()
	for _, a := range d.arenas {
		d.freeBuffer(a.buf)
	}
	for _, im := range d.imports {
		d.freeBuffer(im.buf)
	}
	C.spool_vk_close(d.v)
	d.v = nil
}

func (d *Device) lastError(what string, rc C.int) error {
	return fmt.Errorf("gpu: %s: %s", what, C.GoString(C.spool_vk_last_error(d.v)))
}

func (d *Device) newBuffer(size int64, kind C.int) (*buffer, error) {
	size = roundUp(max(size, align), align)
	device := kind == C.SPOOL_MEM_DEVICE || kind == C.SPOOL_MEM_MAPPED
	if device && d.used+size > d.budget {
		return nil, fmt.Errorf("gpu: %s more device memory would exceed the budget of %s (%s in use)", memText(size), memText(d.budget), memText(d.used))
	}
	var b *C.spool_vk_buffer
	var mapped unsafe.Pointer
	if rc := C.spool_vk_buffer_create(d.v, C.uint64_t(size), kind, &b, &mapped); rc != 0 {
		return nil, d.lastError(fmt.Sprintf("a buffer of %d bytes", size), rc)
	}
	if device {
		d.used += size
	}
	return &buffer{b: b, size: size, mapped: mapped, device: device}, nil
}

func (d *Device) freeBuffer(b *buffer) {
	if b == nil || b.b == nil {
		return
	}
	C.spool_vk_buffer_destroy(d.v, b.b)
	if b.device {
		d.used -= b.size
	}
	b.b = nil
}

// ensure returns *slot grown to at least size bytes (contents not kept).
func (d *Device) ensure(slot **buffer, size int64, kind C.int) (*buffer, error) {
	if *slot != nil && (*slot).size >= size {
		return *slot, nil
	}
	d.freeBuffer(*slot)
	*slot = nil
	// Grow by half again so that slowly rising sizes reallocate rarely.
	b, err := d.newBuffer(max(size, size+size/2), kind)
	if err != nil {
		if b, err = d.newBuffer(size, kind); err != nil {
			return nil, err
		}
	}
	*slot = b
	return b, nil
}

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }

// bytesOf views a float32 slice as bytes.
func bytesOf(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// mappedBytes views [off, off+n) of a host-visible buffer.
func (b *buffer) bytes(off, n int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(b.mapped, off)), n)
}

// upload starts copying host bytes to a device buffer through the staging
// ring; flush waits for every copy started.
func (d *Device) upload(dst *buffer, off int64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	rc := C.spool_vk_stage(d.v, dst.b, C.uint64_t(off), unsafe.Pointer(&src[0]), C.uint64_t(len(src)))
	runtime.KeepAlive(src)
	if rc != 0 {
		return d.lastError("upload", rc)
	}
	return nil
}

// flush waits for the uploads started.
func (d *Device) flush() error {
	if rc := C.spool_vk_stage_flush(d.v); rc != 0 {
		return d.lastError("upload", rc)
	}
	return nil
}

// Keep makes matrices resident on the device for the device's lifetime:
// used in place where the device reads host memory (unified memory with
// host import), else copied once into device memory. Later operations on
// a kept matrix read it there; other matrices are uploaded for each
// operation. The matrices' memory must stay valid and unchanged until
// Close.
func (d *Device) Keep(ms ...*kernels.Matrix) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range ms {
		if m == nil {
			continue
		}
		if err := m.Validate(); err != nil {
			return fmt.Errorf("gpu: %w", err)
		}
		k := keyOf(m)
		if d.kept[k] != nil {
			continue
		}
		p, err := d.place(m)
		if err != nil {
			return err
		}
		d.kept[k] = p
	}
	return d.flush()
}

// SetLimits replaces the device memory budget and the expert bank bound
// (see Options; 0 keeps the current value), for a budget known only once
// the device is open (the memory plan).
func (d *Device) SetLimits(budget, bankBytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if budget > 0 {
		d.budget = budget
	}
	if bankBytes > 0 {
		d.bankBytes = bankBytes
	}
}

// SetResidentExperts replaces Options.ResidentExpertBytes (0 drops the
// resident experts), for a bound known only once the device is open (the
// memory plan's line).
func (d *Device) SetResidentExperts(bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if bytes < d.resident.bytes {
		d.freeResident()
	}
	d.resident.limit = bytes
}

// ResidentExperts reports the routed experts resident in device memory
// and the bytes of their slabs.
func (d *Device) ResidentExperts() (experts int, bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.resident.at), d.resident.bytes
}

// importHost wraps host memory [p, p+size) (aligned) as a buffer.
func (d *Device) importHost(p unsafe.Pointer, size int64) (*buffer, error) {
	var b *C.spool_vk_buffer
	if rc := C.spool_vk_buffer_import(d.v, p, C.uint64_t(size), &b); rc != 0 {
		return nil, d.lastError("host memory import", rc)
	}
	return &buffer{b: b, size: size}, nil
}

// arenaAlloc returns n bytes of device memory for a resident weight.
func (d *Device) arenaAlloc(n int64) (*buffer, int64, error) {
	n = roundUp(n, align)
	for _, a := range d.arenas {
		if a.next+n <= a.buf.size {
			off := a.next
			a.next += n
			return a.buf, off, nil
		}
	}
	b, err := d.newBuffer(max(n, arenaBytes), C.SPOOL_MEM_DEVICE)
	if err != nil {
		if n >= arenaBytes {
			return nil, 0, err
		}
		// Near the budget: an arena of exactly what is needed.
		if b, err = d.newBuffer(n, C.SPOOL_MEM_DEVICE); err != nil {
			return nil, 0, err
		}
	}
	d.arenas = append(d.arenas, &arena{buf: b, next: n})
	return b, 0, nil
}

func (d *Device) setTile(t [2]int, k int) error {
	switch k {
	case 0:
	case 16, 32:
		d.tileK = uint32(k)
	default:
		return fmt.Errorf("gpu: tile depth %d (want 16 or 32)", k)
	}
	switch t {
	case [2]int{}:
	case [2]int{64, 16}, [2]int{64, 32}, [2]int{64, 64}, [2]int{128, 64}, [2]int{128, 128}:
		d.tileFixed = [2]uint32{uint32(t[0]), uint32(t[1])}
	default:
		return fmt.Errorf("gpu: tile %dx%d (want 64x16, 64x32, 64x64, 128x64 or 128x128)", t[0], t[1])
	}
	return nil
}
