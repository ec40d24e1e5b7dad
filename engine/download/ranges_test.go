package download

import (
	"slices"
	"strings"
	"testing"
)

func TestRangesAdd(t *testing.T) {
	tests := []struct {
		name string
		add  []Range
		want Ranges
	}{
		{"empty range ignored", []Range{{5, 5}}, nil},
		{"disjoint kept sorted", []Range{{10, 20}, {0, 5}}, Ranges{{0, 5}, {10, 20}}},
		{"touching merged", []Range{{0, 5}, {5, 10}}, Ranges{{0, 10}}},
		{"overlap merged", []Range{{0, 6}, {4, 10}}, Ranges{{0, 10}}},
		{"bridge", []Range{{0, 2}, {8, 10}, {2, 8}}, Ranges{{0, 10}}},
		{"contained", []Range{{0, 10}, {3, 4}}, Ranges{{0, 10}}},
		{"spans several", []Range{{1, 2}, {4, 5}, {7, 8}, {0, 9}}, Ranges{{0, 9}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs Ranges
			for _, r := range tt.add {
				rs = rs.Add(r)
			}
			if !slices.Equal(rs, tt.want) {
				t.Errorf("got %v, want %v", rs, tt.want)
			}
		})
	}
}

func TestRangesQueries(t *testing.T) {
	rs := Ranges{{0, 10}, {20, 30}, {40, 50}}
	if got := rs.Len(); got != 30 {
		t.Errorf("Len = %d", got)
	}
	if got := rs.Prefix(); got != 10 {
		t.Errorf("Prefix = %d", got)
	}
	if got := (Ranges{{5, 10}}).Prefix(); got != 0 {
		t.Errorf("Prefix of a set not starting at 0 = %d", got)
	}
	if got, want := rs.Missing(60), (Ranges{{10, 20}, {30, 40}, {50, 60}}); !slices.Equal(got, want) {
		t.Errorf("Missing = %v, want %v", got, want)
	}
	if got, want := rs.Missing(45), (Ranges{{10, 20}, {30, 40}}); !slices.Equal(got, want) {
		t.Errorf("Missing(45) = %v, want %v", got, want)
	}
	if got := rs.Overlap(Range{5, 45}); got != 5+10+5 {
		t.Errorf("Overlap = %d", got)
	}
	if got, want := rs.Clip(25), (Ranges{{0, 10}, {20, 25}}); !slices.Equal(got, want) {
		t.Errorf("Clip = %v, want %v", got, want)
	}
}

func TestSplitPieces(t *testing.T) {
	ps := splitPieces(Ranges{{0, 10}, {20, 25}}, 25, 4)
	var got []Range
	for _, p := range ps {
		got = append(got, Range{p.off, p.end})
	}
	want := []Range{{0, 4}, {4, 8}, {8, 10}, {20, 24}, {24, 25}}
	if !slices.Equal(got, want) {
		t.Errorf("pieces %v, want %v", got, want)
	}
	if ps := splitPieces(nil, 7, 4); len(ps) != 1 || ps[0].off != 7 || ps[0].end != 7 {
		t.Errorf("nothing missing: want one empty verify piece at the end")
	}
}

func TestPartialRecord(t *testing.T) {
	etag := strings.Repeat("ab", 32)
	done := Ranges{{0, 100}, {200, 300}}
	b, err := encodePartial(etag, 1000, done)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parsePartial(b, etag, 1000)
	if err != nil || !slices.Equal(got, done) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	bad := []struct{ name, json, want string }{
		{"not json", `{`, "not the expected JSON"},
		{"version", `{"version":2,"etag":"` + etag + `","size":1000,"done":[]}`, "version"},
		{"other blob", `{"version":1,"etag":"x","size":1000,"done":[]}`, "for blob"},
		{"other size", `{"version":1,"etag":"` + etag + `","size":999,"done":[]}`, "for blob"},
		{"outside", `{"version":1,"etag":"` + etag + `","size":1000,"done":[[900,1001]]}`, "outside"},
		{"empty range", `{"version":1,"etag":"` + etag + `","size":1000,"done":[[5,5]]}`, "empty"},
		{"unsorted", `{"version":1,"etag":"` + etag + `","size":1000,"done":[[10,20],[0,5]]}`, "out of order"},
		{"touching", `{"version":1,"etag":"` + etag + `","size":1000,"done":[[0,5],[5,9]]}`, "touches"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parsePartial([]byte(tt.json), etag, 1000)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func FuzzParsePartial(f *testing.F) {
	etag := strings.Repeat("0", 40)
	f.Add([]byte(`{"version":1,"etag":"`+etag+`","size":100,"done":[[0,10],[20,30]]}`), int64(100))
	f.Add([]byte(`{"version":1,"etag":"`+etag+`","size":5,"done":[[-1,3]]}`), int64(5))
	f.Add([]byte(`[]`), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		rs, err := parsePartial(b, etag, size)
		if err != nil {
			return
		}
		// An accepted record is a valid set inside the blob that survives a
		// round trip.
		prev := int64(-1)
		for _, r := range rs {
			if r.Start <= prev || r.End <= r.Start || r.Start < 0 || r.End > size {
				t.Fatalf("accepted bad ranges %v for size %d", rs, size)
			}
			prev = r.End
		}
		enc, err := encodePartial(etag, size, rs)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parsePartial(enc, etag, size)
		if err != nil || !slices.Equal(again, rs) {
			t.Fatalf("round trip of %v: %v, %v", rs, again, err)
		}
	})
}

func FuzzRangesAdd(f *testing.F) {
	f.Add([]byte{0, 5, 3, 9, 20, 30})
	f.Fuzz(func(t *testing.T, b []byte) {
		var rs Ranges
		covered := map[int64]bool{}
		for i := 0; i+1 < len(b); i += 2 {
			r := Range{int64(b[i]), int64(b[i+1])}
			rs = rs.Add(r)
			for x := r.Start; x < r.End; x++ {
				covered[x] = true
			}
		}
		if rs.Len() != int64(len(covered)) {
			t.Fatalf("set %v has %d bytes, want %d", rs, rs.Len(), len(covered))
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].Start <= rs[i-1].End {
				t.Fatalf("not merged: %v", rs)
			}
		}
		if got := rs.Len() + rs.Missing(256).Len(); got != 256 {
			t.Fatalf("Len + Missing = %d, want 256 (%v)", got, rs)
		}
	})
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {999, "999 B"}, {1000, "1.0 kB"}, {1_500_000, "1.5 MB"},
		{383_760_077_466, "383.8 GB"}, {2_000_000_000_000, "2.0 TB"},
	}
	for _, tt := range tests {
		if got := FormatBytes(tt.n); got != tt.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	j := &Job{opts: Options{RetryBase: 100, RetryMax: 1000}}
	for failures := 1; failures < 20; failures++ {
		d := j.backoff(failures, nil)
		ceil := min(int64(100)<<(failures-1), 1000)
		if failures > 10 {
			ceil = 1000
		}
		if int64(d) < ceil/2 || int64(d) > ceil {
			t.Errorf("backoff(%d) = %d, want in [%d, %d]", failures, d, ceil/2, ceil)
		}
	}
}

func TestReserve(t *testing.T) {
	tests := []struct {
		opt, toFetch, want int64
	}{
		{0, 0, 0},
		{0, 1 << 20, MinReserve},
		{0, 383_760_077_466, 3_837_600_774},
		{-1, 1 << 30, 0},
		{5, 1 << 30, 5},
	}
	for _, tt := range tests {
		j := &Job{opts: Options{Reserve: tt.opt}}
		if got := j.reserveFor(tt.toFetch); got != tt.want {
			t.Errorf("reserve(opt %d, %d) = %d, want %d", tt.opt, tt.toFetch, got, tt.want)
		}
	}
}
