//go:build !unix

package diskio

import (
	"errors"
	"io"
	"os"
)

// preadFile reads at off through os.File.ReadAt. It returns the bytes read and
// no error at the end of the file.
func preadFile(file *os.File, p []byte, off int64) (int, error) {
	n, err := file.ReadAt(p, off)
	if errors.Is(err, io.EOF) {
		return n, nil
	}
	return n, err
}
