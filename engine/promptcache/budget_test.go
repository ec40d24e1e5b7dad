package promptcache

import (
	"context"
	"testing"
)

// TestMemoryShareGivesWayAndGrowsBack: under pressure the memory tier's
// cap drops and blocks leave memory (to the disk tier); the prompt still
// restores exactly, from disk; at full share the tier takes blocks again.
func TestMemoryShareGivesWayAndGrowsBack(t *testing.T) {
	o := diskOptions(t, "share")
	c := mustNew(t, o)
	prompt := promptOf(50, 3)
	src, hidden := filled(t, prompt)
	c.Store(context.Background(), src, hidden)
	before := c.Stats()
	if before.Memory.Blocks != 12 {
		t.Fatalf("memory tier holds %d blocks, want 12", before.Memory.Blocks)
	}
	if _, err := c.SetMemoryShare(1.5); err == nil {
		t.Fatal("a share above 1 was taken")
	}
	capNow, err := c.SetMemoryShare(0)
	if err != nil || capNow != 0 {
		t.Fatalf("share 0: cap %d, %v", capNow, err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := c.Stats()
	if after.Memory.Bytes != 0 || after.Memory.CapBytes != 0 || after.Memory.Evictions < 12 || after.Dropped != 0 {
		t.Fatalf("at share 0 the memory tier is %+v (dropped %d), want empty with every block on disk", after.Memory, after.Dropped)
	}
	seq, m, _ := restoreAll(t, c, prompt)
	if m.Disk != 48 || m.Memory != 0 {
		t.Fatalf("under pressure the prompt matched %+v, want 48 tokens from disk", m)
	}
	sameState(t, seq, src, 48)

	if capNow, err = c.SetMemoryShare(1); err != nil || capNow != o.MemoryBytes {
		t.Fatalf("share 1: cap %d (%v), want the planned %d", capNow, err, o.MemoryBytes)
	}
	if _, m, _ := restoreAll(t, c, prompt); m.Tokens != 48 {
		t.Fatalf("after the pressure the prompt matched %+v", m)
	}
	if _, m, _ := restoreAll(t, c, prompt); m.Memory != 48 {
		t.Fatalf("grown back, the memory tier holds %d of the prompt's 48 tokens", m.Memory)
	}
}
