package kvcache

import (
	"errors"
	"testing"
)

func TestSequenceGrowthTrimAndLimit(t *testing.T) {
	geo := Geometry{Layers: 2, KVLora: 4, Rope: 2, IndexDim: 3, Indexer: []bool{true, false}, MTP: true}
	s := New(geo, 100)
	if err := s.Reserve(make([]int, 100)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		f := float32(i)
		s.Layer(0).Append([]float32{f, f, f, f, f, f}, []float32{f, f, f})
		s.Layer(1).Append([]float32{f, f, f, f, f, f}, nil)
	}
	// Capacity never exceeds the context limit.
	if c := cap(s.Layer(0).kv.f32); c > 100*6 {
		t.Errorf("KV capacity %d exceeds the limit's %d", c, 600)
	}
	if got := s.Bytes(); got != 100*(4+2+3+4+2)*4 {
		t.Errorf("bytes %d", got)
	}
	if want := int64((3*(4+2) + 3) * 4); geo.BytesPerToken() != want {
		t.Errorf("bytes per token %d, want %d", geo.BytesPerToken(), want)
	}
	var ce *ContextError
	if err := s.Reserve([]int{1}); !errors.As(err, &ce) || ce.Limit != 100 {
		t.Errorf("overflow: %v", err)
	}
	s.Trim(10)
	if s.Len() != 10 || s.Layer(0).Len() != 10 || s.Layer(0).index.length() != 30 || s.Layer(1).index.length() != 0 {
		t.Errorf("trim left len %d, layer %d, index %d", s.Len(), s.Layer(0).Len(), s.Layer(0).index.length())
	}
	if s.Layer(0).KV(9, 10, nil)[0] != 9 {
		t.Error("trim lost kept rows")
	}
	s.Trim(-1)
	if s.Len() != 0 {
		t.Error("negative trim")
	}
}
