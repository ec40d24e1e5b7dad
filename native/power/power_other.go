//go:build !linux && !darwin

package power

// PreventSleep takes no power assertion on this system: it returns a release
// that does nothing, with a nil error.
func PreventSleep(reason string) (release func(), err error) {
	return func() {}, nil
}
