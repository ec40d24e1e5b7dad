package container

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spoolhq/spool/kernels"
)

// quantTensors returns a U8 weight of nb bytes and an F32 scale tensor of
// ns scales (value 0.5) named name and name.qs.
func quantTensors(name string, nb, ns int) []Tensor {
	data := make([]byte, nb)
	for i := range data {
		data[i] = byte(i * 7)
	}
	scales := make([]float32, ns)
	for i := range scales {
		scales[i] = 0.5
	}
	return []Tensor{
		{TensorSpec{name, "U8", []int64{int64(nb)}}, data},
		{TensorSpec{name + ".qs", "F32", []int64{int64(ns)}}, f32Bytes(scales...)},
	}
}

func TestMatrixInfoFormats(t *testing.T) {
	var ts []Tensor
	ts = append(ts, quantTensors("int8", 4*6, 4)...)
	ts = append(ts, quantTensors("int4row", 4*3, 4)...)
	ts = append(ts, quantTensors("int4g16", 4*20, 4*3)...) // [4, 40], ceil(40/16) = 3 groups
	ts = append(ts, quantTensors("int4g64", 2*64, 2*2)...) // [2, 128]: 16 and 32 give 8 and 4 groups
	ts = append(ts, quantTensors("int4odd", 3*3, 3*1)...)  // [3, 5]
	ts = append(ts, quantTensors("badbytes", 25, 4)...)
	ts = append(ts, quantTensors("badscales", 12, 5)...)
	ts = append(ts, quantTensors("badgroups", 4*20, 7)...)
	ts = append(ts,
		Tensor{TensorSpec{"f32", "F32", []int64{2, 3}}, f32Bytes(1, 2, 3, 4, 5, 6)},
		Tensor{TensorSpec{"bf16", "BF16", []int64{2, 3}}, make([]byte, 12)},
		Tensor{TensorSpec{"f32flat", "F32", []int64{6}}, f32Bytes(1, 2, 3, 4, 5, 6)},
		Tensor{TensorSpec{"noscales", "U8", []int64{24}}, make([]byte, 24)},
		Tensor{TensorSpec{"qsf16", "U8", []int64{24}}, make([]byte, 24)},
		Tensor{TensorSpec{"qsf16.qs", "F16", []int64{4}}, make([]byte, 8)},
		Tensor{TensorSpec{"f32q", "F32", []int64{6}}, make([]byte, 24)},
		Tensor{TensorSpec{"f32q.qs", "F32", []int64{2}}, make([]byte, 8)},
	)
	dir := t.TempDir()
	if err := writeFile(filepath.Join(dir, "m.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	tests := []struct {
		name       string
		rows, cols int
		format     kernels.Format
		group      int
		err        string
	}{
		{"int8", 4, 6, kernels.Int8Row, 0, ""},
		{"int4row", 4, 6, kernels.Int4Row, 0, ""},
		{"int4row", 4, 5, kernels.Int4Row, 0, ""},
		{"int4g16", 4, 40, kernels.Int4Group, 16, ""},
		{"int4g64", 2, 128, kernels.Int4Group, 64, ""},
		{"int4odd", 3, 5, kernels.Int4Row, 0, ""},
		{"f32", 2, 3, kernels.F32, 0, ""},
		{"bf16", 2, 3, kernels.F32, 0, ""},
		{"f32", 3, 2, 0, 0, "shape [2 3], want [3 2]"},
		{"f32flat", 2, 3, 0, 0, "shape [6], want [2 3]"},
		{"f32", 2, 4, 0, 0, "6 elements (24 bytes), want 8 elements (32 bytes)"},
		{"badbytes", 4, 6, 0, 0, "25 bytes match no format for [4, 6] (int8-row wants 24, int4 wants 12)"},
		{"int8", 4, 7, 0, 0, "24 bytes match no format for [4, 7] (int8-row wants 28, int4 wants 16)"},
		{"int8", 2, 12, 0, 0, "int8-row [2, 12] wants 2 scales (8 bytes), found 4 (16 bytes)"},
		{"badscales", 4, 6, 0, 0, "int4 [4, 6] wants 4 scales per row or 4*ceil(6/gs)"},
		{"badgroups", 4, 40, 0, 0, "found 7 (28 bytes)"},
		{"noscales", 4, 6, 0, 0, "U8 weight without its noscales.qs scales tensor"},
		{"qsf16", 4, 6, 0, 0, "scales dtype F16, want F32"},
		{"f32q", 2, 3, 0, 0, "dtype F32 has a .qs sibling"},
		{"missing", 2, 3, 0, 0, `"missing" is missing`},
		{"int8", 0, 6, 0, 0, "empty"},
	}
	for _, tt := range tests {
		m, err := c.MatrixInfo(tt.name, tt.rows, tt.cols)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), tt.name) {
				t.Errorf("MatrixInfo(%s, %d, %d) = %v, want an error naming it and containing %q", tt.name, tt.rows, tt.cols, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("MatrixInfo(%s, %d, %d): %v", tt.name, tt.rows, tt.cols, err)
			continue
		}
		if m.Format != tt.format || m.GroupSize != tt.group {
			t.Errorf("MatrixInfo(%s, %d, %d) = %s group %d, want %s group %d", tt.name, tt.rows, tt.cols, m.Format, m.GroupSize, tt.format, tt.group)
		}
		mat, err := c.Matrix(tt.name, tt.rows, tt.cols)
		if err != nil {
			t.Errorf("Matrix(%s): %v", tt.name, err)
			continue
		}
		if err := mat.Validate(); err != nil {
			t.Errorf("Matrix(%s): %v", tt.name, err)
		}
		// Each row read alone dequantizes to the matrix's row.
		for r := range tt.rows {
			buf := make([]byte, m.RowBytes())
			row, err := c.ReadMatrixRow(m, r, buf)
			if err != nil {
				t.Errorf("ReadMatrixRow(%s, %d): %v", tt.name, r, err)
				continue
			}
			got, want := make([]float32, tt.cols), make([]float32, tt.cols)
			kernels.DequantRow(got, row, 0)
			kernels.DequantRow(want, mat, r)
			if !slices.Equal(got, want) {
				t.Errorf("ReadMatrixRow(%s, %d) = %v, the matrix's row is %v", tt.name, r, got, want)
			}
		}
		if _, err := c.ReadMatrixRow(m, tt.rows, make([]byte, m.RowBytes())); err == nil {
			t.Errorf("ReadMatrixRow(%s) of row %d of %d: no error", tt.name, tt.rows, tt.rows)
		}
		if _, err := c.ReadMatrixRow(m, 0, make([]byte, m.RowBytes()+1)); err == nil {
			t.Errorf("ReadMatrixRow(%s) into a buffer of the wrong size: no error", tt.name)
		}
	}
	mat, err := c.Matrix("f32", 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if mat.F32[5] != 6 {
		t.Errorf("f32 matrix values %v", mat.F32)
	}
}

// readF32File reads a little-endian float32 file.
func readF32File(t *testing.T, path string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// TestQuantCheck compares dequantized container matrices with the float32
// values the reference generator decoded from the same bytes.
func TestQuantCheck(t *testing.T) {
	for _, model := range []string{"glm52-tiny", "glm52-mini"} {
		t.Run(model, func(t *testing.T) {
			c, cfg := openFixture(t, model)
			refs := filepath.Join(fixtures(t), model+"-refs")
			raw, err := os.ReadFile(filepath.Join(refs, "refs.json"))
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				QuantCheck map[string]struct {
					File  string `json:"file"`
					Shape []int  `json:"shape"`
				} `json:"quant_check"`
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			I, H := cfg.MoEIntermediateSize, cfg.HiddenSize

			gu := r.QuantCheck["model.layers.1.mlp.experts.gate_up_proj"]
			if len(gu.Shape) != 2 || gu.Shape[0] != 2*I || gu.Shape[1] != H {
				t.Fatalf("gate_up_proj reference shape %v, want [%d %d]", gu.Shape, 2*I, H)
			}
			want := readF32File(t, filepath.Join(refs, gu.File))
			gate, err := c.Matrix(ExpertName(1, 0, "gate_proj"), I, H)
			if err != nil {
				t.Fatal(err)
			}
			up, err := c.Matrix(ExpertName(1, 0, "up_proj"), I, H)
			if err != nil {
				t.Fatal(err)
			}
			compareRows(t, "gate_proj", gate, want[:I*H])
			compareRows(t, "up_proj", up, want[I*H:])

			loc, err := c.Expert(1, 0, cfg)
			if err != nil {
				t.Fatal(err)
			}
			sgate, sup, _, err := c.ReadExpert(loc, make([]byte, loc.BufferSize()))
			if err != nil {
				t.Fatal(err)
			}
			compareRows(t, "streamed gate_proj", sgate, want[:I*H])
			compareRows(t, "streamed up_proj", sup, want[I*H:])

			qb := r.QuantCheck["model.layers.0.self_attn.q_b_proj.weight"]
			rows, cols := cfg.NumHeads*cfg.QKHeadDim(), cfg.QLoraRank
			if len(qb.Shape) != 2 || qb.Shape[0] != rows || qb.Shape[1] != cols {
				t.Fatalf("q_b_proj reference shape %v, want [%d %d]", qb.Shape, rows, cols)
			}
			m, err := c.Matrix("model.layers.0.self_attn.q_b_proj.weight", rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			compareRows(t, "q_b_proj", m, readF32File(t, filepath.Join(refs, qb.File)))
		})
	}
}

// compareRows checks that every dequantized row of m equals want exactly.
func compareRows(t *testing.T, what string, m *kernels.Matrix, want []float32) {
	t.Helper()
	if len(want) != m.Rows*m.Cols {
		t.Fatalf("%s: reference has %d values, matrix [%d, %d]", what, len(want), m.Rows, m.Cols)
	}
	row := make([]float32, m.Cols)
	bad := 0
	for r := 0; r < m.Rows; r++ {
		kernels.DequantRow(row, m, r)
		for i, v := range row {
			if w := want[r*m.Cols+i]; math.Float32bits(v) != math.Float32bits(w) {
				if bad < 5 {
					t.Errorf("%s (%s) [%d, %d] = %g, want %g", what, m.Format, r, i, v, w)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(want))
	}
}
