package diskio

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenDirectHonoredOnDisk(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
		t.Skipf("%s is in memory; TestOpenDirectFallsBackInMemory covers it", dir)
	}
	path, want := writeTestFile(t, dir, testFileSize)
	f, err := OpenDirect(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Direct() {
		t.Fatalf("OpenDirect(%s) on file system type %#x did not honor O_DIRECT", path, st.Type)
	}
	checkReads(t, f, want)
}

func TestOpenDirectFallsBackInMemory(t *testing.T) {
	const shm = "/dev/shm"
	var st unix.Statfs_t
	if err := unix.Statfs(shm, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Skipf("%s is not a tmpfs here", shm)
	}
	if unix.Access(shm, unix.W_OK) != nil {
		t.Skipf("%s is not writable", shm)
	}
	path, want := writeTestFile(t, shm, testFileSize)
	f, err := OpenDirect(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Direct() {
		t.Fatalf("OpenDirect(%s) on tmpfs reports direct I/O", path)
	}
	checkReads(t, f, want)
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
