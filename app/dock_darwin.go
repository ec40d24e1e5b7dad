//go:build darwin && cgo && !headless

package main

/*
#cgo CFLAGS: -x objective-c
#cgo LDFLAGS: -framework Cocoa
#import <Cocoa/Cocoa.h>

// Wails v2 sets the regular activation policy at launch; a menu-bar app
// wants no Dock icon, so switch to accessory once the window is up.
static void spoolSetAccessory(void) {
	dispatch_async(dispatch_get_main_queue(), ^{
		[NSApp setActivationPolicy:NSApplicationActivationPolicyAccessory];
	});
}

// An accessory app's window does not come forward by itself.
static void spoolActivate(void) {
	dispatch_async(dispatch_get_main_queue(), ^{
		[NSApp activateIgnoringOtherApps:YES];
	});
}
*/
import "C"

func setAccessoryPolicy() { C.spoolSetAccessory() }

func activateApp() { C.spoolActivate() }
