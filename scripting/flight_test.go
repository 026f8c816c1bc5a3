package scripting

import "testing"

// TestFlightCounterDrain: Drain waits for the commands counted before it
// to end, each stripe seen empty once being enough even though others
// enter meanwhile, and gives up when told.
func TestFlightCounterDrain(t *testing.T) {
	var f FlightCounter
	f.Enter(1)
	f.Enter(2)
	polls := 0
	stop := func() bool {
		// Between polls the commands counted before end one by one, and
		// a new one enters a stripe already seen empty.
		polls++
		switch polls {
		case 1:
			f.Exit(1)
		case 2:
			f.Enter(3)
			f.Exit(2)
		}
		return polls > 10
	}
	if !f.Drain(stop) {
		t.Fatal("Drain gave up while the commands counted before it ended")
	}
	if polls != 2 {
		t.Fatalf("Drain returned after %d polls, want once both had ended (2)", polls)
	}

	var g FlightCounter
	g.Enter(5)
	if g.Drain(func() bool { return true }) {
		t.Fatal("Drain reported drained while a command was still in flight")
	}
}
