package sysinfo

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spoolhq/spool/native/offheap"
)

func TestParseProcKB(t *testing.T) {
	cases := []struct {
		file string
		want map[string]uint64
	}{
		{"smaps_rollup.txt", map[string]uint64{"Rss": 1712 << 10, "Pss": 315 << 10, "Anonymous": 112 << 10, "Swap": 0}},
		{"status.txt", map[string]uint64{"VmRSS": 1828 << 10, "RssAnon": 116 << 10, "VmSwap": 0, "Threads": 1}},
		{"meminfo.txt", map[string]uint64{"MemTotal": 24683620 << 10, "MemAvailable": 24260716 << 10, "HugePages_Total": 0}},
	}
	for _, c := range cases {
		data, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		got := parseProcKB(data)
		for k, v := range c.want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s: %s = %d (present %v), want %d", c.file, k, g, ok, v)
			}
		}
		for _, k := range []string{"Name", "Cpus_allowed_list", "State", "Uid"} {
			if _, ok := got[k]; ok {
				t.Errorf("%s: non-numeric field %s parsed", c.file, k)
			}
		}
	}
}

func TestParseProcKBSkipsMalformedLines(t *testing.T) {
	in := "A: 1 kB\nB 2 kB\nC D: 3\nE: x kB\nF: 4 MB\nG: 18446744073709551615 kB\nH: 5 kB extra\n: 6\nI:7\n"
	got := parseProcKB([]byte(in))
	want := map[string]uint64{"A": 1024, "I": 7}
	if !maps.Equal(got, want) {
		t.Errorf("parseProcKB = %v, want %v", got, want)
	}
}

func FuzzParseProcKB(f *testing.F) {
	for _, name := range []string{"smaps_rollup.txt", "status.txt", "meminfo.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("A: 1 kB\nB: 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := parseProcKB(data)
		// Writing the values back without units must parse to the same map.
		keys := sort.StringSlice(make([]string, 0, len(got)))
		for k := range got {
			keys = append(keys, k)
		}
		keys.Sort()
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s: %d\n", k, got[k])
		}
		if again := parseProcKB([]byte(b.String())); !maps.Equal(again, got) {
			t.Fatalf("round trip: %v, want %v", again, got)
		}
	})
}

func TestMachineMemory(t *testing.T) {
	total, available, err := MachineMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("total %d MiB, available %d MiB", total>>20, available>>20)
	if total < 256<<20 || available == 0 || available > total {
		t.Fatalf("MachineMemory = %d total, %d available", total, available)
	}
}

func TestFootprintFollowsTouchedMemory(t *testing.T) {
	const size = 64 << 20
	const slack = 12 << 20
	s0, err := Footprint()
	if err != nil {
		t.Fatal(err)
	}
	b, err := offheap.AllocAligned(size, os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	s1, err := Footprint()
	if err != nil {
		t.Fatal(err)
	}
	if err := offheap.Discard(b); err != nil {
		t.Fatal(err)
	}
	s2, err := Footprint()
	if err != nil {
		t.Fatal(err)
	}
	if err := offheap.Free(b); err != nil {
		t.Fatal(err)
	}
	t.Logf("source %s; before %+v; touched %+v; discarded %+v", s1.Source, s0, s1, s2)
	within := func(name string, delta int64) {
		t.Helper()
		if delta < size-slack || delta > size+slack {
			t.Errorf("%s changed by %d MiB, want about %d MiB", name, delta>>20, size>>20)
		}
	}
	within("RSS after touching", int64(s1.RSS-s0.RSS))
	within("Footprint after touching", int64(s1.Footprint-s0.Footprint))
	within("RSS after discarding", int64(s1.RSS-s2.RSS))
	within("Footprint after discarding", int64(s1.Footprint-s2.Footprint))
	if s1.RSS < s1.Anon || s1.Footprint < s1.Anon {
		t.Errorf("sample inconsistent: %+v", s1)
	}
}
