//go:build vulkan && cgo

package gpu

import "github.com/spoolhq/spool/kernels"

// Attention computes out[s] = o_proj(ctx[s]) for the query rows of a: per
// head, q_nope is absorbed into the latent space through kv_b's key rows,
// the [latent | rope] query scores the row's keys, the softmax weights the
// cached latents, and kv_b's value rows map the result back.
//
// Rows go in blocks of consecutive rows of one kind. A dense block scores
// the cache entries up to its last row's (causal). A selected block (DSA)
// first gathers each row's listed entries, then scores only those, so its
// work is bounded by the selection, not by the context. Each block's
// scores (and gathered keys) take at most Options.ScoreBytes.
func (d *Device) Attention(out []float32, a *Attention) error {
	if err := a.check(out); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.timeOp("attention")()
	S, T, nh := len(a.Last), a.T, a.Heads
	dn, dr, dv, rkv := a.Nope, a.Rope, a.Value, a.Latent
	dq, wd := dn+dr, rkv+dr
	H := a.O.Rows

	plan := planAttention(a, d.scoreBytes)
	o := d.newOp()
	qr := o.input(bytesOf(a.Q[:S*nh*dq]))
	var cr region
	if a.CacheBF16 != nil {
		cr = o.inputBF16(a.CacheBF16[:T*wd])
	} else {
		cr = o.input(bytesOf(a.Cache[:T*wd]))
	}
	vr := o.input(u32bytes(plan.vis))
	var lr region
	if plan.list != nil {
		lr = o.input(u32bytes(plan.list))
	}
	kvb, op := o.weight(a.KVB), o.weight(a.O)
	qcat := o.floats(S * nh * wd)
	scores := o.floats(plan.scoreFloats)
	var keys region
	if plan.keyFloats > 0 {
		keys = o.floats(plan.keyFloats)
	}
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
	for _, b := range plan.blocks {
		var err error
		if b.gathered {
			err = o.gatheredBlock(a, b, plan, cr, lr, keys, qcat, scores, vr, clat)
		} else {
			err = o.denseBlock(a, b, plan, cache, qcat, scores, vr, clat)
		}
		if err != nil {
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

// denseBlock scores block b's rows against cache entries 0..b.keys-1,
// applies the causal (or mask) softmax and weights the latents into clat.
func (o *op) denseBlock(a *Attention, b attnBlock, p attnPlan, cache *placed, qcat, scores, vr, clat region) error {
	nh, rkv, wd := a.Heads, a.Latent, a.Latent+a.Rope
	rows := (b.s1 - b.s0) * nh
	if err := o.gemm(gemm{w: cache, M: b.keys, K: wd, N: rows, x: o.bind(qcat), xOff: b.s0 * nh * wd, xLd: wd, y: o.bind(scores), yLd: b.keys}); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	if err := o.softmax(scores, vr, rows, b.keys, nh, p.mode, p.words, b.s0, a.Scale); err != nil {
		return err
	}
	if err := o.gemm(gemm{w: cache, trans: true, M: rkv, K: b.keys, N: rows, x: o.bind(scores), xLd: b.keys, y: o.bind(clat), yOff: b.s0 * nh * rkv, yLd: rkv}); err != nil {
		return err
	}
	return o.barrier()
}

// gatheredBlock gathers the listed cache entries of block b's rows (b.keys
// per row, the short ones padded), scores each row's heads against its own
// entries only, and weights them into clat.
func (o *op) gatheredBlock(a *Attention, b attnBlock, p attnPlan, cr, lr, keys, qcat, scores, vr, clat region) error {
	nh, rkv, wd := a.Heads, a.Latent, a.Latent+a.Rope
	n, K := b.s1-b.s0, b.keys
	gy, gz := grid2(n * K)
	push := []uint32{uint32(n * K), uint32(wd), uint32(b.s0 * p.listLd)}
	if err := o.dispatch(shGather, nil, []binding{o.bind(cr), o.bind(lr), o.bind(keys)}, push, (wd+255)/256, gy, gz); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	// One z per row: its K gathered keys are the matrix, its heads the rows.
	g := &placed{m: &kernels.Matrix{Format: kernels.F32, Rows: K, Cols: wd}, data: o.bind(keys), scales: binding{o.d.dummy, 0, align}}
	step := int64(K * wd * 4)
	if err := o.gemm(gemm{w: g, M: K, K: wd, N: nh, Z: n, x: o.bind(qcat), xOff: b.s0 * nh * wd, xLd: wd, y: o.bind(scores), yLd: K,
		zW: step, zX: int64(nh * wd), zY: int64(nh * K)}); err != nil {
		return err
	}
	if err := o.barrier(); err != nil {
		return err
	}
	if err := o.softmax(scores, vr, n*nh, K, nh, 0, 0, b.s0, a.Scale); err != nil {
		return err
	}
	if err := o.gemm(gemm{w: g, trans: true, M: rkv, K: K, N: nh, Z: n, x: o.bind(scores), xLd: K, y: o.bind(clat), yOff: b.s0 * nh * rkv, yLd: rkv,
		zW: step, zX: int64(nh * K), zY: int64(nh * rkv)}); err != nil {
		return err
	}
	return o.barrier()
}

// softmax records the masked softmax of rows score rows of keys values,
// query row rowOff + r/heads for score row r.
func (o *op) softmax(scores, vr region, rows, keys, heads int, mode uint32, words, rowOff int, scale float32) error {
	gx, gy := grid2(rows)
	push := []uint32{uint32(rows), uint32(keys), uint32(keys), uint32(heads), mode, uint32(words), uint32(rowOff), f32bits(scale)}
	if err := o.dispatch(shSoftmax, nil, []binding{o.bind(scores), o.bind(vr)}, push, gx, gy, 1); err != nil {
		return err
	}
	return o.barrier()
}

// attnBlock is rows [s0, s1) of one kind: keys is the cache entries a
// dense block scores, or the entries per row a gathered block holds.
type attnBlock struct {
	s0, s1   int
	keys     int
	gathered bool
}

// attnPlan is how Attention splits its rows and what the softmax reads:
// vis[s] is the last visible key of row s (mode 0: its last cache entry,
// or its last gathered entry), or with mode 1 a bit mask of words per row;
// list holds the gathered rows' entries, listLd per row.
type attnPlan struct {
	blocks      []attnBlock
	mode        uint32
	words       int
	vis, list   []uint32
	listLd      int
	scoreFloats int
	keyFloats   int
}

func planAttention(a *Attention, scoreBytes int64) attnPlan {
	S, nh, wd := len(a.Last), a.Heads, a.Latent+a.Rope
	var p attnPlan
	selected := func(s int) bool { return a.Keys != nil && a.Keys[s] != nil }
	for s := range S {
		if selected(s) {
			p.listLd = max(p.listLd, len(a.Keys[s]))
		}
	}
	if p.listLd > 0 && a.MaskKeys {
		// Every row scores its causal entries; selections are bit masks.
		p.mode, p.words = 1, (a.T+31)/32
		p.vis = make([]uint32, S*p.words)
		for s := range S {
			row := p.vis[s*p.words : (s+1)*p.words]
			if !selected(s) {
				for t := 0; t <= a.Last[s]; t++ {
					row[t>>5] |= 1 << (t & 31)
				}
				continue
			}
			for _, t := range a.Keys[s] {
				row[t>>5] |= 1 << (t & 31)
			}
		}
		p.listLd = 0
	} else {
		p.vis = make([]uint32, S)
		if p.listLd > 0 {
			p.list = make([]uint32, S*p.listLd)
		}
		for s := range S {
			if !selected(s) {
				p.vis[s] = uint32(a.Last[s])
				continue
			}
			keys := a.Keys[s]
			p.vis[s] = uint32(len(keys) - 1)
			row := p.list[s*p.listLd : (s+1)*p.listLd]
			for j := range row {
				row[j] = uint32(keys[min(j, len(keys)-1)]) // padding repeats a listed entry, masked
			}
		}
	}
	gathered := func(s int) bool { return p.listLd > 0 && selected(s) }
	for s0 := 0; s0 < S; {
		g := gathered(s0)
		var limit int // rows per block
		if g {
			limit = int(scoreBytes / int64(4*p.listLd*(nh+wd)))
		} else {
			limit = int(scoreBytes / int64(4*nh*a.T))
		}
		s1 := s0 + 1
		for s1 < S && s1-s0 < max(limit, 1) && gathered(s1) == g {
			s1++
		}
		b := attnBlock{s0: s0, s1: s1, gathered: g, keys: p.listLd}
		if !g {
			b.keys = 0 // selected rows (mask mode) list only keys up to their last
			for s := s0; s < s1; s++ {
				b.keys = max(b.keys, a.Last[s]+1)
			}
		} else {
			p.keyFloats = max(p.keyFloats, (s1-s0)*b.keys*wd)
		}
		p.scoreFloats = max(p.scoreFloats, (s1-s0)*nh*b.keys)
		p.blocks = append(p.blocks, b)
		s0 = s1
	}
	return p
}
