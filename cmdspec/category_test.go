package cmdspec

import (
	"slices"
	"testing"
)

// TestCategoryNames checks that every category bit has a name and that
// names and bits map to each other.
func TestCategoryNames(t *testing.T) {
	for i, name := range categoryNames {
		// The array has a slot for every category: a missing name is "".
		if name == "" {
			t.Fatalf("category bit %d has no name", i)
		}
		if c := CategoryByName(name); c != 1<<i || !slices.Equal(c.Names(), []string{name}) {
			t.Errorf("%s: bit %b", name, c)
		}
	}
	if CategoryByName("@read") != 0 || CategoryByName("nosuch") != 0 {
		t.Error("CategoryByName takes bare lower-case names only")
	}
}
