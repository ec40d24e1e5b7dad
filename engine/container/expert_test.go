package container

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/spoolhq/spool/kernels"
)

func TestExpertLocations(t *testing.T) {
	tests := []struct {
		model         string
		layer, expert int
		coalesced     bool
		format        kernels.Format
	}{
		{"glm52-tiny", 1, 5, false, kernels.Int4Row},
		{"glm52-tiny", 1, 4, true, kernels.Int4Row},
		{"glm52-tiny", 3, 15, true, kernels.Int4Row},
		{"glm52-tiny", 4, 0, true, kernels.Int8Row}, // MTP layer
		{"glm52-mini", 2, 17, false, kernels.Int4Group},
		{"glm52-mini", 5, 63, true, kernels.Int4Group},
		{"glm52-mini", 6, 9, true, kernels.Int8Row},
	}
	for _, tt := range tests {
		c, cfg := openFixture(t, tt.model)
		loc, err := c.Expert(tt.layer, tt.expert, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if loc.Coalesced != tt.coalesced || loc.Down.Format != tt.format {
			t.Errorf("%s layer %d expert %d: coalesced %v format %s, want %v %s", tt.model, tt.layer, tt.expert, loc.Coalesced, loc.Down.Format, tt.coalesced, tt.format)
		}
		wantWeights := 3
		if tt.coalesced {
			wantWeights = 1
		}
		if len(loc.Weights) != wantWeights {
			t.Errorf("%s layer %d expert %d: %d weight extents, want %d", tt.model, tt.layer, tt.expert, len(loc.Weights), wantWeights)
		}
		var ext int64
		for _, e := range loc.Weights {
			ext += e.Length
		}
		if ext != loc.WeightBytes || loc.WeightBytes != loc.Gate.Weight.Size+loc.Up.Weight.Size+loc.Down.Weight.Size {
			t.Errorf("%s layer %d expert %d: extents cover %d bytes, weights are %d", tt.model, tt.layer, tt.expert, ext, loc.WeightBytes)
		}

		// A caller buffer with a misaligned start still works (scales copied).
		for _, shift := range []int{0, 1} {
			buf := make([]byte, loc.BufferSize()+int64(shift))[shift:]
			gate, up, down, err := c.ReadExpert(loc, buf)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []struct {
				m    *kernels.Matrix
				info MatrixInfo
			}{{gate, loc.Gate}, {up, loc.Up}, {down, loc.Down}} {
				want, err := c.ReadMatrix(p.info)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(p.m.Data, want.Data) || !reflect.DeepEqual(p.m.Scales, want.Scales) || p.m.Format != want.Format || p.m.GroupSize != want.GroupSize {
					t.Errorf("%s %s: ReadExpert differs from Matrix", tt.model, p.info.Name)
				}
			}
			if !inside(buf, gate.Data) || !inside(buf, down.Data) {
				t.Errorf("%s: expert data does not point into the caller buffer", tt.model)
			}
		}
	}
}

// inside reports whether b's memory lies within buf.
func inside(buf, b []byte) bool {
	for i := range buf {
		if &buf[i] == &b[0] {
			return true
		}
	}
	return false
}

func TestExpertRefusals(t *testing.T) {
	c, cfg := openFixture(t, "glm52-tiny")
	tests := []struct {
		layer, expert int
		want          string
	}{
		{0, 0, "layer 0 has no routed experts"},
		{5, 0, "layer 5 has no routed experts"},
		{-1, 0, "layer -1 has no routed experts"},
		{1, 16, "expert 16 is out of range (0..15)"},
		{1, -1, "expert -1 is out of range"},
	}
	for _, tt := range tests {
		if _, err := c.Expert(tt.layer, tt.expert, cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Expert(%d, %d) = %v, want %q", tt.layer, tt.expert, err, tt.want)
		}
	}
	loc, err := c.Expert(1, 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.ReadExpert(loc, make([]byte, loc.BufferSize()-1)); err == nil || !strings.Contains(err.Error(), "byte buffer") {
		t.Errorf("ReadExpert with a short buffer: %v", err)
	}
	if got := loc.Reads(); got != 2 {
		t.Errorf("a coalesced fixture expert takes %d reads, want 2 (weights, adjacent scales)", got)
	}
}
