//go:build !linux && !darwin

package diskio

import "os"

func punch(*os.File, int64, int64) error { return ErrPunchUnsupported }

func blockSize(*os.File) (int64, error) { return 4096, nil }
