package native

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultProbeBlock is the read size MeasureSequentialRead uses when given a
// block size of 0 or less.
const DefaultProbeBlock = 8 << 20

// BandwidthSample is the result of a read bandwidth measurement.
type BandwidthSample struct {
	Bytes          int64   // bytes read
	Seconds        float64 // wall time of the reads
	BytesPerSecond float64 // Bytes / Seconds
	// Direct reports whether every file was read with direct I/O honored.
	// When false, some bytes may have come from the page cache and the
	// figure says little about the disk.
	Direct    bool
	Files     int // files read, fully or partly
	BlockSize int // bytes per read
}

// MeasureSequentialRead reads the files in order, each from its start, in
// blocks of blockSize bytes (rounded up to DirectAlign; DefaultProbeBlock when
// 0 or less) through OpenDirect, until maxBytes have been read or the files
// end (maxBytes 0 or less means no limit). Reads go into one slab, so the
// figure is disk bandwidth with one outstanding request, not memory speed.
func MeasureSequentialRead(ctx context.Context, paths []string, maxBytes int64, blockSize int) (BandwidthSample, error) {
	if len(paths) == 0 {
		return BandwidthSample{}, errors.New("native: measure read bandwidth: no files given")
	}
	if blockSize <= 0 {
		blockSize = DefaultProbeBlock
	}
	blockSize = (blockSize + DirectAlign - 1) &^ (DirectAlign - 1)
	slab, err := AllocAligned(blockSize, DirectAlign)
	if err != nil {
		return BandwidthSample{}, fmt.Errorf("native: measure read bandwidth: %w", err)
	}
	defer Free(slab)

	s := BandwidthSample{Direct: true, BlockSize: blockSize}
	var elapsed time.Duration
	for _, path := range paths {
		if maxBytes > 0 && s.Bytes >= maxBytes {
			break
		}
		n, d, direct, err := readSequential(ctx, path, slab, maxBytes-s.Bytes, maxBytes > 0)
		s.Bytes += n
		elapsed += d
		if n > 0 {
			s.Files++
			s.Direct = s.Direct && direct
		}
		if err != nil {
			return s, fmt.Errorf("native: measure read bandwidth: %w", err)
		}
	}
	if s.Bytes == 0 {
		return s, errors.New("native: measure read bandwidth: the files hold no bytes")
	}
	s.Seconds = elapsed.Seconds()
	if s.Seconds > 0 {
		s.BytesPerSecond = float64(s.Bytes) / s.Seconds
	}
	return s, nil
}

// readSequential reads path from its start into slab, block by block, until
// the file ends or, when limited, budget bytes are read.
func readSequential(ctx context.Context, path string, slab []byte, budget int64, limited bool) (int64, time.Duration, bool, error) {
	f, err := OpenDirect(path)
	if err != nil {
		return 0, 0, false, err
	}
	defer f.Close()
	var read int64
	start := time.Now()
	for off := int64(0); off < f.Size(); off += int64(len(slab)) {
		if limited && read >= budget {
			break
		}
		if err := ctx.Err(); err != nil {
			return read, time.Since(start), f.Direct(), err
		}
		n := min(int64(len(slab)), f.Size()-off)
		if limited {
			n = min(n, budget-read)
		}
		if _, err := f.ReadAtAligned(slab, off, n); err != nil {
			return read, time.Since(start), f.Direct(), err
		}
		read += n
	}
	return read, time.Since(start), f.Direct(), nil
}
