//go:build darwin && cgo

package power

/*
#cgo LDFLAGS: -framework IOKit -framework CoreFoundation
#include <stdlib.h>
#include <CoreFoundation/CoreFoundation.h>
#include <IOKit/pwr_mgt/IOPMLib.h>

// spool_prevent_idle_sleep takes a PreventUserIdleSystemSleep assertion named
// reason and stores its id in *id. It returns the IOReturn code.
static int spool_prevent_idle_sleep(const char *reason, unsigned int *id) {
	CFStringRef name = CFStringCreateWithCString(NULL, reason, kCFStringEncodingUTF8);
	if (name == NULL) {
		return -1;
	}
	IOPMAssertionID aid = kIOPMNullAssertionID;
	IOReturn r = IOPMAssertionCreateWithName(kIOPMAssertionTypePreventUserIdleSystemSleep,
		kIOPMAssertionLevelOn, name, &aid);
	CFRelease(name);
	*id = (unsigned int)aid;
	return (int)r;
}

static void spool_release_assertion(unsigned int id) {
	IOPMAssertionRelease((IOPMAssertionID)id);
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// PreventSleep keeps the Mac from idle system sleep until release is called,
// through an IOKit power assertion (kIOPMAssertionTypePreventUserIdleSystemSleep)
// named reason; `pmset -g assertions` lists it. The display may still sleep,
// and closing the lid still sleeps the machine. release may be called more
// than once.
func PreventSleep(reason string) (release func(), err error) {
	creason := C.CString(reason)
	defer C.free(unsafe.Pointer(creason))
	var id C.uint
	if r := C.spool_prevent_idle_sleep(creason, &id); r != 0 {
		return nil, fmt.Errorf("power: IOPMAssertionCreateWithName(%q): IOReturn 0x%x", reason, uint32(r))
	}
	var once sync.Once
	return func() { once.Do(func() { C.spool_release_assertion(id) }) }, nil
}
