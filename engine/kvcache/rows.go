package kvcache

import "math"

// rows is one layer's stored values, a row of width values per token: as
// float32, or as bfloat16 (Geometry.BF16), which halves the cache and
// rounds each value to 8 significant bits (to nearest, ties to even) as
// it is stored. Readers get float32 either way.
type rows struct {
	f32   []float32
	b16   []uint16
	bf16  bool
	width int
}

// length is the values stored.
func (r *rows) length() int {
	if r.bf16 {
		return len(r.b16)
	}
	return len(r.f32)
}

// add appends whole rows (len(src) a multiple of width), growing capacity
// geometrically but never beyond limit rows, so a full sequence holds
// exactly what the memory plan counted.
func (r *rows) add(src []float32, limit int) {
	if len(src) == 0 {
		return
	}
	if !r.bf16 {
		r.f32 = appendBounded(r.f32, src, r.width, limit)
		return
	}
	n := len(r.b16)
	if n+len(src) > cap(r.b16) {
		grown := make([]uint16, n, growTo(cap(r.b16), n+len(src), r.width, limit))
		copy(grown, r.b16)
		r.b16 = grown
	}
	r.b16 = r.b16[:n+len(src)]
	ToBF16(r.b16[n:], src)
}

// growTo is the capacity, in values, that a buffer of capacity have grows
// to for need values of rows of width: doubling, at least 64 rows, at most
// limit rows (unless need is more).
func growTo(have, need, width, limit int) int {
	rows := max(2*have/max(width, 1), 64)
	if limit > 0 {
		rows = min(rows, limit)
	}
	return max(rows*width, need)
}

// appendBounded appends whole rows of width values to dst (see add).
func appendBounded(dst, src []float32, width, limit int) []float32 {
	if len(dst)+len(src) > cap(dst) {
		grown := make([]float32, len(dst), growTo(cap(dst), len(dst)+len(src), width, limit))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, src...)
}

// trim keeps the first n rows.
func (r *rows) trim(n int) {
	if r.bf16 {
		r.b16 = r.b16[:min(len(r.b16), n*r.width)]
	} else if r.f32 != nil {
		r.f32 = r.f32[:min(len(r.f32), n*r.width)]
	}
}

// view returns rows [lo, hi) as float32: the stored values themselves, or
// converted into buf (at least (hi-lo)*width long) from bfloat16.
func (r *rows) view(lo, hi int, buf []float32) []float32 {
	if !r.bf16 {
		return r.f32[lo*r.width : hi*r.width : hi*r.width]
	}
	out := buf[:(hi-lo)*r.width]
	FromBF16(out, r.b16[lo*r.width:hi*r.width])
	return out
}

// copyTo writes rows [lo, hi) into dst as float32.
func (r *rows) copyTo(dst []float32, lo, hi int) {
	if !r.bf16 {
		copy(dst, r.f32[lo*r.width:hi*r.width])
		return
	}
	FromBF16(dst[:(hi-lo)*r.width], r.b16[lo*r.width:hi*r.width])
}

// export appends rows [lo, hi) to dst as float32.
func (r *rows) export(dst []float32, lo, hi int) []float32 {
	n := len(dst)
	dst = append(dst, make([]float32, (hi-lo)*r.width)...)
	r.copyTo(dst[n:], lo, hi)
	return dst
}

// bytes is the memory the stored values take.
func (r *rows) bytes() int64 {
	if r.bf16 {
		return 2 * int64(len(r.b16))
	}
	return 4 * int64(len(r.f32))
}

// ToBF16 rounds each float32 of src to bfloat16 (to nearest, ties to
// even; NaN stays NaN) into dst.
func ToBF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		b := math.Float32bits(v)
		if b&0x7fffffff > 0x7f800000 { // NaN: keep it one
			dst[i] = uint16(b>>16) | 0x40
			continue
		}
		dst[i] = uint16((b + 0x7fff + (b>>16)&1) >> 16)
	}
}

// FromBF16 widens each bfloat16 of src to float32 (exactly) into dst.
func FromBF16(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = math.Float32frombits(uint32(v) << 16)
	}
}
