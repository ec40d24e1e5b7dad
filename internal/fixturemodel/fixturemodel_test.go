package fixturemodel

import "testing"

func TestSharedOpensOnce(t *testing.T) {
	a := Shared(t, "glm52-tiny")
	if a.Model == nil || a.Config == nil {
		t.Fatalf("Shared returned %+v", a)
	}
	if b := Shared(t, "glm52-tiny"); b != a {
		t.Fatal("a second Shared call loaded the model again")
	}
}
