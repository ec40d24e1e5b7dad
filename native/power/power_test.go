package power

import "testing"

func TestPreventSleepRelease(t *testing.T) {
	release, err := PreventSleep("spool test")
	if err != nil {
		t.Fatalf("PreventSleep: %v", err)
	}
	if release == nil {
		t.Fatal("PreventSleep returned a nil release")
	}
	release()
	release() // a second release must be harmless
}
