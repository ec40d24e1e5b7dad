//go:build !unix

package atomicfile

import "errors"

var errInvalid = errors.New("atomicfile: no EINVAL on this OS")
