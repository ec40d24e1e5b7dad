//go:build unix

package atomicfile

import "syscall"

var errInvalid error = syscall.EINVAL
