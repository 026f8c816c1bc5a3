package tests

import (
	"os/exec"
	"testing"
)

// The high-availability example of docs/operations.md starts real
// processes and runs until Ctrl-C, so it is run by hand; here it must at
// least parse.
func TestHAScriptParses(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	if out, err := exec.Command(bash, "-n", "../examples/ha/run.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n examples/ha/run.sh: %v\n%s", err, out)
	}
}
