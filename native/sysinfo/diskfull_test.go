//go:build unix

package sysinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

func TestIsDiskFull(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("saving: %w", &fs.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}), true},
		{&fs.PathError{Op: "write", Path: "/x", Err: syscall.EIO}, false},
		{errors.New("no space left on device"), false}, // text is not the errno
		{nil, false},
	} {
		if got := IsDiskFull(tc.err); got != tc.want {
			t.Errorf("IsDiskFull(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
