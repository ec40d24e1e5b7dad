package model

import "math"

// rmsNorm writes w * x / sqrt(mean(x^2) + eps) into dst. The sum of squares
// is accumulated in float64.
func rmsNorm(dst, x, w []float32, eps float64) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	r := 1 / math.Sqrt(ss/float64(len(x))+eps)
	for i, v := range x {
		dst[i] = float32(float64(v)*r) * w[i]
	}
}

// layerNorm writes (x - mean) / sqrt(var + eps) * w + b (biased variance).
func layerNorm(dst, x, w, b []float32, eps float64) {
	var mean float64
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	var variance float64
	for _, v := range x {
		d := float64(v) - mean
		variance += d * d
	}
	variance /= float64(len(x))
	r := 1 / math.Sqrt(variance+eps)
	for i, v := range x {
		dst[i] = float32((float64(v)-mean)*r)*w[i] + b[i]
	}
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(float64(-x)))) }

// rope holds the rotation of every position for a rotary width d, computed
// as HF does: inv_freq and the angle in float32, cos/sin rounded to float32.
type rope struct {
	half    int
	invFreq []float32
}

func newRope(d int, theta float64) *rope {
	r := &rope{half: d / 2, invFreq: make([]float32, d/2)}
	for j := range r.invFreq {
		exp := float32(2*j) / float32(d)
		r.invFreq[j] = float32(1 / math.Pow(theta, float64(exp)))
	}
	return r
}

// apply rotates the interleaved pairs (x[2j], x[2j+1]) of x[:2*half] by the
// angles of position pos.
func (r *rope) apply(x []float32, pos int) {
	p := float32(pos)
	for j := 0; j < r.half; j++ {
		angle := p * r.invFreq[j]
		c := float32(math.Cos(float64(angle)))
		s := float32(math.Sin(float64(angle)))
		a, b := x[2*j], x[2*j+1]
		x[2*j] = a*c - b*s
		x[2*j+1] = b*c + a*s
	}
}

// angles writes the rotations of position pos into cs (cos, sin per pair,
// 2*half values): what apply computes, for rotating many vectors of one
// position with rotate.
func (r *rope) angles(cs []float32, pos int) {
	p := float32(pos)
	for j := 0; j < r.half; j++ {
		angle := p * r.invFreq[j]
		cs[2*j] = float32(math.Cos(float64(angle)))
		cs[2*j+1] = float32(math.Sin(float64(angle)))
	}
}

// rotate applies the rotations cs (from angles) to the interleaved pairs
// of x, as apply does.
func rotate(x, cs []float32) {
	for j := 0; j < len(cs)/2; j++ {
		c, s := cs[2*j], cs[2*j+1]
		a, b := x[2*j], x[2*j+1]
		x[2*j] = a*c - b*s
		x[2*j+1] = b*c + a*s
	}
}
