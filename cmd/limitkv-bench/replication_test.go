package main

import (
	"testing"
	"time"
)

func TestParseSyncLog(t *testing.T) {
	for _, tc := range []struct {
		line string
		keys int64
		took time.Duration
		bad  bool
	}{
		{line: `time=2025-01-02T03:04:05.678Z level=INFO msg="Synchronization with replica 127.0.0.1:4242 succeeded" keys=1000000 took=1.234s`,
			keys: 1_000_000, took: 1234 * time.Millisecond},
		{line: `time=2025-01-02T03:04:05.678Z level=INFO msg="MASTER <-> REPLICA sync: Finished with success" keys=7 took=850ms`,
			keys: 7, took: 850 * time.Millisecond},
		{line: `level=INFO msg="Synchronization with replica 127.0.0.1:4242 succeeded" keys=12`, bad: true},
		{line: `level=INFO msg=x keys=many took=1s`, bad: true},
		{line: `level=INFO msg=x keys=1 took=soon`, bad: true},
	} {
		keys, took, err := parseSyncLog(tc.line)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: parsed as %d keys in %v, want an error", tc.line, keys, took)
			}
			continue
		}
		if err != nil || keys != tc.keys || took != tc.took {
			t.Errorf("%s: got %d keys in %v (%v), want %d in %v", tc.line, keys, took, err, tc.keys, tc.took)
		}
	}
}
