package diskio

import (
	"errors"
	"fmt"
	"os"
)

// ErrPunchUnsupported is wrapped by PunchHole's error where the file's file
// system cannot deallocate a range of a file (FAT, exFAT, HFS+, network
// volumes, systems other than Linux and macOS).
var ErrPunchUnsupported = errors.New("the file system cannot release part of a file")

// PunchHole releases the disk blocks of f inside [off, off+n): every whole
// file-system block of the range is deallocated and reads as zeros
// afterwards; the bytes of a partial block at either end stay as they
// are, and the file's size does not change (Linux:
// fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE); macOS: fcntl
// F_PUNCHHOLE, which takes whole blocks only). It returns the bytes of the
// whole blocks it released: the range's block-aligned interior. Punching a
// range again is harmless. The caller syncs f to make the hole durable.
func PunchHole(f *os.File, off, n int64) (int64, error) {
	if off < 0 || n < 0 {
		return 0, fmt.Errorf("diskio: punching %d bytes at %d of %s", n, off, f.Name())
	}
	bs, err := blockSize(f)
	if err != nil {
		return 0, fmt.Errorf("diskio: %s: %w", f.Name(), err)
	}
	start := (off + bs - 1) / bs * bs
	end := (off + n) / bs * bs
	if end <= start {
		return 0, nil
	}
	if err := punch(f, start, end-start); err != nil {
		return 0, fmt.Errorf("diskio: releasing bytes %d-%d of %s: %w", start, end, f.Name(), err)
	}
	return end - start, nil
}

// AllocatedBytes is the disk space a file takes (its allocated blocks, as
// du counts them), which a file with holes has less of than its size.
func AllocatedBytes(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("diskio: %w", err)
	}
	return allocated(fi), nil
}
