package diskio

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// WriteThrough asks the system not to keep f's data in the unified buffer
// cache (fcntl F_NOCACHE), so that writing hundreds of gigabytes does not
// push other files' hot pages out of memory. It is a hint: reads and writes
// keep working the same way.
func WriteThrough(f *os.File) error {
	if _, err := unix.FcntlInt(f.Fd(), unix.F_NOCACHE, 1); err != nil {
		return fmt.Errorf("diskio: F_NOCACHE on %s: %w", f.Name(), err)
	}
	return nil
}
