//go:build vulkan && cgo

package gpu

import "github.com/spoolhq/spool/kernels"

// Attention computes out[s] = o_proj(ctx[s]) for the query rows of a: per
// head, q_nope is absorbed into the latent space through kv_b's key rows,
// the [latent | rope] query scores every visible cache entry, the softmax
// weights the cached latents, and kv_b's value rows map the result back.
// Score rows are computed in blocks of at most Options.ScoreBytes.
func (d *Device) Attention(out []float32, a *Attention) error {
	if err := a.check(out); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	S, T, nh := len(a.Last), a.T, a.Heads
	dn, dr, dv, rkv := a.Nope, a.Rope, a.Value, a.Latent
	dq, wd := dn+dr, rkv+dr
	H := a.O.Rows

	o := d.newOp()
	qr := o.input(bytesOf(a.Q[:S*nh*dq]))
	cr := o.input(bytesOf(a.Cache[:T*wd]))
	mode, words, vis := visibility(a)
	vr := o.input(u32bytes(vis))
	kvb, op := o.weight(a.KVB), o.weight(a.O)
	qcat := o.floats(S * nh * wd)
	block := int(max(1, min(int64(S), d.scoreBytes/int64(4*nh*T))))
	scores := o.floats(block * nh * T)
	clat := o.floats(S * nh * rkv)
	ctx := o.floats(S * nh * dv)
	outR := o.floats(S * H)
	res := o.output(outR, bytesOf(out[:S*H]))
	if err := o.begin(); err != nil {
		return err
	}
	rb, spr := rowBytes(a.KVB), int64(a.KVB.ScalesPerRow())
	headRows := int64(dn + dv)
	// Absorb: qcat[s][h][:latent] = q_nope[s][h] . W_K[h] (kv_b key rows).
	if err := o.gemm(gemm{w: kvb, trans: true, M: rkv, K: dn, N: S, Z: nh,
		x: o.bind(qr), xLd: nh * dq, y: o.bind(qcat), yLd: nh * wd,
		zW: headRows * rb, zS: headRows * spr, zX: int64(dq), zY: int64(wd)}); err != nil {
		return err
	}
	if err := o.copy2D(o.bind(qr), o.bind(qcat), S*nh, dr, dn, dq, rkv, wd); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	cache := &placed{m: &kernels.Matrix{Format: kernels.F32, Rows: T, Cols: wd}, data: o.bind(cr), scales: binding{d.dummy, 0, align}}
	for s0 := 0; s0 < S; s0 += block {
		rows := min(block, S-s0) * nh
		if err := o.gemm(gemm{w: cache, M: T, K: wd, N: rows, x: o.bind(qcat), xOff: s0 * nh * wd, xLd: wd, y: o.bind(scores), yLd: T}); err != nil {
			return err
		}
		if err := o.barrier(); err != nil {
			return err
		}
		gx, gy := grid2(rows)
		push := []uint32{uint32(rows), uint32(T), uint32(T), uint32(nh), mode, uint32(words), uint32(s0), f32bits(a.Scale)}
		if err := o.dispatch(shSoftmax, nil, []binding{o.bind(scores), o.bind(vr)}, push, gx, gy, 1); err != nil {
			return err
		}
		if err := o.barrier(); err != nil {
			return err
		}
		if err := o.gemm(gemm{w: cache, trans: true, M: rkv, K: T, N: rows, x: o.bind(scores), xLd: T, y: o.bind(clat), yOff: s0 * nh * rkv, yLd: rkv}); err != nil {
			return err
		}
		if err := o.barrier(); err != nil {
			return err
		}
	}
	// Values: ctx[s][h] = W_V[h] . clat[s][h] (kv_b value rows).
	vals := *kvb
	vals.wOff += int64(dn) * rb
	vals.sOff += int64(dn) * spr
	if err := o.gemm(gemm{w: &vals, M: dv, K: rkv, N: S, Z: nh,
		x: o.bind(clat), xLd: nh * rkv, y: o.bind(ctx), yLd: nh * dv,
		zW: headRows * rb, zS: headRows * spr, zX: int64(rkv), zY: int64(dv)}); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	if err := o.gemm(gemm{w: op, M: H, K: nh * dv, N: S, x: o.bind(ctx), xLd: nh * dv, y: o.bind(outR), yLd: H}); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	return o.finish(res)
}

// visibility encodes which cache entries each query row sees: mode 0, the
// last entry per row (causal); mode 1, a bit mask of words per row.
func visibility(a *Attention) (mode uint32, words int, vis []uint32) {
	S := len(a.Last)
	sparse := false
	for _, k := range a.Keys {
		sparse = sparse || k != nil
	}
	if !sparse {
		vis = make([]uint32, S)
		for s, l := range a.Last {
			vis[s] = uint32(l)
		}
		return 0, 0, vis
	}
	words = (a.T + 31) / 32
	vis = make([]uint32, S*words)
	for s := range S {
		row := vis[s*words : (s+1)*words]
		if a.Keys[s] == nil {
			for t := 0; t <= a.Last[s]; t++ {
				row[t>>5] |= 1 << (t & 31)
			}
			continue
		}
		for _, t := range a.Keys[s] {
			row[t>>5] |= 1 << (t & 31)
		}
	}
	return 1, words, vis
}
