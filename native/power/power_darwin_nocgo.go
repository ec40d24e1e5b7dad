//go:build darwin && !cgo

package power

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
)

// PreventSleep keeps the Mac from idle system sleep until release is called.
// Built without cgo, it runs `caffeinate -i -w <pid>` as a child process: the
// assertion is held while caffeinate runs, and caffeinate exits by itself if
// this process dies. reason is not shown by caffeinate. release may be called
// more than once.
func PreventSleep(reason string) (release func(), err error) {
	cmd := exec.Command("/usr/bin/caffeinate", "-i", "-w", strconv.Itoa(os.Getpid()))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("power: keep awake for %q: start caffeinate: %w", reason, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}, nil
}
