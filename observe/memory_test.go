package observe

import "testing"

func TestHuman(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0B"}, {1023, "1023B"}, {1024, "1.00K"}, {1536, "1.50K"},
		{1 << 20, "1.00M"}, {3 << 30, "3.00G"}, {5 << 40, "5.00T"},
	} {
		if got := Human(c.n); got != c.want {
			t.Errorf("Human(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// The peak only rises, and the startup figure is the first peak.
func TestMemoryMarks(t *testing.T) {
	var m MemoryMarks
	m.SetStartup(100)
	if m.Startup() != 100 || m.Peak() != 100 {
		t.Fatalf("startup %d peak %d, want 100 100", m.Startup(), m.Peak())
	}
	m.Note(50)
	m.Note(300)
	m.Note(200)
	if m.Peak() != 300 || m.Startup() != 100 {
		t.Fatalf("startup %d peak %d, want 100 300", m.Startup(), m.Peak())
	}
}

func TestRuntimeMemory(t *testing.T) {
	rt := ReadRuntimeMemory()
	if rt.Heap <= 0 || rt.Sys < rt.Heap || rt.HeapGoal <= 0 {
		t.Fatalf("implausible figures %+v", rt)
	}
	if _, ok := ReadCPU(); !ok {
		t.Fatal("no CPU time")
	}
}
