package offheap

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLockBeyondLimit locks more than the soft RLIMIT_MEMLOCK and expects the
// error to name the limit. Processes with CAP_IPC_LOCK (root) ignore the
// limit, so there the lock succeeds.
func TestLockBeyondLimit(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur == unix.RLIM_INFINITY || lim.Cur > 256<<20 {
		t.Skipf("RLIMIT_MEMLOCK soft limit %s is too large to exceed in a test", byteLen(lim.Cur))
	}
	b, err := AllocAligned(int(lim.Cur)+4<<20, testAlign)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(b)
	err = Lock(b)
	if err == nil {
		t.Logf("locked %s beyond RLIMIT_MEMLOCK %s: the process has CAP_IPC_LOCK", byteLen(uint64(len(b))), byteLen(lim.Cur))
		if err := Unlock(b); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !errors.Is(err, ErrLockLimit) || !strings.Contains(err.Error(), "RLIMIT_MEMLOCK soft "+byteLen(lim.Cur)) {
		t.Fatalf("Lock beyond the limit: %v; want an error wrapping ErrLockLimit and naming the limit", err)
	}
}
