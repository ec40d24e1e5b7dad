//go:build vulkan && cgo

package gpu

/*
#include "vk.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/spoolhq/spool/kernels"
)

// region is a range of the operation's device scratch (the work buffer).
type region struct{ off, size int64 }

// transfer is a host slice and the staging and scratch offsets it moves
// through. An upload from widen (bfloat16 values, host nil) writes them
// into staging as float32.
type transfer struct {
	host       []byte
	widen      []uint16
	stage, dev int64
}

// size is the bytes the transfer moves.
func (t transfer) size() int64 {
	if t.widen != nil {
		return 4 * int64(len(t.widen))
	}
	return int64(len(t.host))
}

// op lays out and records one operation: its scratch regions, the inputs
// uploaded before its dispatches and the outputs read back after them. A
// layout is computed first (scratch, inputs, outputs), then begin sizes
// the buffers and records the uploads, the caller records dispatches, and
// finish runs everything and copies the outputs out.
type op struct {
	d              *Device
	work, up, down int64
	inputs         []transfer
}

func (d *Device) newOp() *op { return &op{d: d} }

// scratch reserves n bytes of device scratch.
func (o *op) scratch(n int64) region {
	r := region{o.work, roundUp(max(n, 4), 4)}
	o.work += roundUp(max(n, 4), align)
	return r
}

// floats reserves scratch for n float32 values.
func (o *op) floats(n int) region { return o.scratch(4 * int64(n)) }

// input reserves scratch for host bytes uploaded before the dispatches.
func (o *op) input(b []byte) region {
	r := o.scratch(int64(len(b)))
	o.inputs = append(o.inputs, transfer{host: b, stage: o.up, dev: r.off})
	o.up += roundUp(int64(len(b)), align)
	return r
}

// inputBF16 reserves scratch for bfloat16 values uploaded as float32
// before the dispatches: they are widened as they are staged.
func (o *op) inputBF16(v []uint16) region {
	n := 4 * int64(len(v))
	r := o.scratch(n)
	o.inputs = append(o.inputs, transfer{widen: v, stage: o.up, dev: r.off})
	o.up += roundUp(n, align)
	return r
}

// output reserves read-back staging for copying r into host bytes b
// (finish does it).
func (o *op) output(r region, b []byte) transfer {
	t := transfer{host: b, stage: o.down, dev: r.off}
	o.down += roundUp(int64(len(b)), align)
	return t
}

// later reserves scratch and staging for host bytes that the caller fills
// and stages (stage) after begin, between submits.
func (o *op) later(b []byte) transfer {
	r := o.scratch(int64(len(b)))
	t := transfer{host: b, stage: o.up, dev: r.off}
	o.up += roundUp(int64(len(b)), align)
	return t
}

// region returns the scratch region of a transfer.
func (t transfer) region() region { return region{t.dev, roundUp(max(t.size(), 4), 4)} }

// begin sizes the buffers, stages the inputs and records their uploads.
func (o *op) begin() error {
	d := o.d
	if _, err := d.ensure(&d.work, o.work, C.SPOOL_MEM_DEVICE); err != nil {
		return err
	}
	if o.up > 0 {
		if _, err := d.ensure(&d.up, o.up, C.SPOOL_MEM_UPLOAD); err != nil {
			return err
		}
	}
	if o.down > 0 {
		if _, err := d.ensure(&d.down, o.down, C.SPOOL_MEM_READBACK); err != nil {
			return err
		}
	}
	return o.stage(o.inputs...)
}

// stage copies host bytes into staging and records their uploads.
func (o *op) stage(in ...transfer) error {
	d := o.d
	defer addTime(&d.times.Stage, time.Now())
	for _, t := range in {
		if t.widen != nil {
			widenBF16(d.up.bytes(t.stage, t.size()), t.widen)
		} else {
			parallelCopy(d.up.bytes(t.stage, t.size()), t.host)
		}
		if rc := C.spool_vk_copy(d.v, d.up.b, C.uint64_t(t.stage), d.work.b, C.uint64_t(t.dev), C.uint64_t(t.size())); rc != 0 {
			return d.lastError("copy", rc)
		}
	}
	return o.barrier()
}

func (o *op) barrier() error {
	if rc := C.spool_vk_barrier(o.d.v); rc != 0 {
		return o.d.lastError("barrier", rc)
	}
	return nil
}

// bind is region r of the work buffer as a binding.
func (o *op) bind(r region) binding { return binding{o.d.work, r.off, r.size} }

// submit runs what was recorded and waits for it.
func (o *op) submit() error {
	defer o.d.timeRun(time.Now())
	if rc := C.spool_vk_submit(o.d.v); rc != 0 {
		return o.d.lastError("submit", rc)
	}
	return nil
}

// finish records the copies of outs, runs everything recorded and copies
// outs to the host. An operation may finish several times.
func (o *op) finish(outs ...transfer) error {
	d := o.d
	for _, t := range outs {
		if rc := C.spool_vk_copy(d.v, d.work.b, C.uint64_t(t.dev), d.down.b, C.uint64_t(t.stage), C.uint64_t(len(t.host))); rc != 0 {
			return d.lastError("copy", rc)
		}
	}
	if err := o.submit(); err != nil {
		return err
	}
	defer addTime(&d.times.Readback, time.Now())
	for _, t := range outs {
		parallelCopy(t.host, d.down.bytes(t.stage, int64(len(t.host))))
	}
	return nil
}

// parallelCopyMin is the smallest copy split over goroutines: staging
// memory is written through uncached (write-combined) mappings, whose
// throughput grows with the writing cores.
const parallelCopyMin = 2 << 20

// parallelCopy copies src into dst (of the same length) on up to 8
// goroutines.
func parallelCopy(dst, src []byte) {
	parts := min(8, runtime.GOMAXPROCS(0), len(src)/(1<<20))
	if len(src) < parallelCopyMin || parts <= 1 {
		copy(dst, src)
		return
	}
	chunk := (len(src)/parts + 63) &^ 63
	var wg sync.WaitGroup
	for lo := 0; lo < len(src); lo += chunk {
		hi := min(lo+chunk, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}

// widenBF16 writes the bfloat16 values v into dst as little-endian
// float32 (exactly: a bfloat16 is a float32's high half), spread over up
// to 8 goroutines as parallelCopy does.
func widenBF16(dst []byte, v []uint16) {
	out := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(dst))), len(v))
	parts := min(8, runtime.GOMAXPROCS(0), len(v)/(1<<18))
	if parts <= 1 {
		for i, b := range v {
			out[i] = uint32(b) << 16
		}
		return
	}
	chunk := (len(v) + parts - 1) / parts
	var wg sync.WaitGroup
	for lo := 0; lo < len(v); lo += chunk {
		hi := min(lo+chunk, len(v))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, b := range v[lo:hi] {
				out[lo+i] = uint32(b) << 16
			}
		}()
	}
	wg.Wait()
}

// dispatch records a dispatch of sh with the bindings and push constants.
func (o *op) dispatch(sh shader, spec []uint32, binds []binding, push []uint32, gx, gy, gz int) error {
	d := o.d
	id, err := d.pipeline(sh, spec...)
	if err != nil {
		return err
	}
	if len(binds) != sh.nbind {
		return fmt.Errorf("gpu: %s takes %d buffers, got %d", sh.name, sh.nbind, len(binds))
	}
	var cb [8]C.spool_vk_bind
	for i, b := range binds {
		if b.size > d.maxRange {
			return fmt.Errorf("gpu: %s binding %d of %d bytes exceeds the device's %d-byte range", sh.name, i, b.size, d.maxRange)
		}
		cb[i] = C.spool_vk_bind{buf: b.buf.b, offset: C.uint64_t(b.off), _range: C.uint64_t(b.size)}
	}
	var pp unsafe.Pointer
	if len(push) > 0 {
		pp = unsafe.Pointer(&push[0])
	}
	if gx > 65535 || gy > 65535 || gz > 65535 {
		return fmt.Errorf("gpu: %s grid %d x %d x %d exceeds 65535", sh.name, gx, gy, gz)
	}
	rc := C.spool_vk_dispatch(d.v, id, &cb[0], C.int(len(binds)), pp, C.uint32_t(4*len(push)), C.uint32_t(gx), C.uint32_t(gy), C.uint32_t(gz))
	if rc != 0 {
		return d.lastError("dispatch "+sh.name, rc)
	}
	return nil
}

// grid2 splits n workgroups over x and y (x at most 65535).
func grid2(n int) (int, int) {
	if n <= 65535 {
		return max(n, 1), 1
	}
	return 65535, (n + 65534) / 65535
}

// gemm is one dispatch of the gemm shader (see shaders/gemm.comp).
type gemm struct {
	w                    *placed
	trans                bool
	gather               uint32 // 0, 1 or 2
	M, K, N, Z           int
	x, y                 binding
	xOff, xLd, yOff, yLd int
	zW, zS, zX, zY       int64
	table, rows          binding
	listOff              int // GATHER: the first entry of the row list in rows
}

// tile picks the tile shape for M outputs over N rows (BM x BN; the
// reduction depth is Device.tileK). Measured on an H200 (512 rows of
// GLM-5.2's shapes): 64x64 runs 15-19 TFLOP/s and
// 128x64 about the same on the widest matrices, while 128x128 spills its
// registers and runs 2; narrow tiles serve few rows (decode-sized
// batches, an expert's rows).
func tile(M, N int) (bm, bn uint32) {
	switch {
	case N <= 16:
		return 64, 16
	case N <= 32:
		return 64, 32
	}
	return 64, 64
}

func (o *op) gemm(g gemm) error {
	if g.M <= 0 || g.N <= 0 || g.K <= 0 {
		return nil
	}
	m := g.w.m
	bm, bn := tile(g.M, g.N)
	if f := o.d.tileFixed; f[0] != 0 {
		bm, bn = f[0], f[1]
	}
	trans := uint32(0)
	if g.trans {
		trans = 1
	}
	if g.table.buf == nil {
		g.table = binding{o.d.dummy, 0, align}
		g.rows = binding{o.d.dummy, 0, align}
	}
	z := max(g.Z, 1)
	push := []uint32{
		uint32(g.M), uint32(g.K), uint32(g.N),
		uint32(g.w.wOff), uint32(rowBytes(m)),
		uint32(g.w.sOff), uint32(m.ScalesPerRow()), uint32(groupCols(m)),
		uint32(g.xOff), uint32(g.xLd), uint32(g.yOff), uint32(g.yLd),
		uint32(g.zW), uint32(g.zS), uint32(g.zX), uint32(g.zY),
		uint32(g.listOff),
	}
	spec := []uint32{g.w.format(), trans, bm, bn, g.gather, o.d.tileK}
	wd, ws := o.wbind(g.w)
	binds := []binding{wd, ws, g.x, g.y, g.table, g.rows}
	return o.dispatch(shGemm, spec, binds, push, (g.M+int(bm)-1)/int(bm), (g.N+int(bn)-1)/int(bn), z)
}

// weight returns where m lies for this operation: kept on the device, or
// uploaded into scratch with the inputs.
func (o *op) weight(m *kernels.Matrix) *placed {
	if p := o.d.kept[keyOf(m)]; p != nil {
		return p
	}
	data, scales := matrixBytes(m)
	p := &placed{m: m, transient: true, dataR: o.input(data)}
	if len(scales) > 0 {
		p.scalesR = o.input(scales)
	}
	return p
}

// wbind returns the data and scales bindings of a placed matrix.
func (o *op) wbind(p *placed) (data, scales binding) {
	if !p.transient {
		return p.data, p.scales
	}
	data = o.bind(p.dataR)
	scales = binding{o.d.dummy, 0, align}
	if p.scalesR.size > 0 {
		scales = o.bind(p.scalesR)
	}
	return data, scales
}
