package acl

import (
	"fmt"
	"slices"
	"testing"
)

// A denial like one of the ten newest (same reason, context, object and
// user, within a minute) counts in it and becomes the newest; others are
// new entries, newest first, at most maxLen of them.
func TestLogGroupsAndTrims(t *testing.T) {
	var l Log
	add := func(reason Result, object string, ms int64) {
		l.Add(LogEntry{Reason: reason, Context: CtxToplevel, Object: object, Username: "u", Ctime: ms}, 4)
	}
	add(DeniedKey, "z", 0) // the oldest, trimmed when the log is full
	add(DeniedKey, "b", 0)
	add(DeniedKey, "b", 0)
	add(DeniedKey, "b", 30_000)
	add(DeniedKey, "b", 91_000) // more than a minute after the last: new
	add(DeniedCmd, "set", 91_000)
	add(DeniedKey, "c", 91_000)
	var got []string
	for _, e := range l.Newest(10) {
		got = append(got, fmt.Sprintf("%s %s %d %d", ReasonName(e.Reason), e.Object, e.Count, e.Ctime))
	}
	want := []string{"key c 1 91000", "command set 1 91000", "key b 1 91000", "key b 3 30000"}
	if !slices.Equal(got, want) {
		t.Fatalf("log:\n got %q\nwant %q", got, want)
	}
	// A repeat joins the newest entry like it and moves it to the front.
	add(DeniedKey, "b", 60_000)
	if e := l.Newest(1)[0]; e.Object != "b" || e.Count != 2 || e.Ctime != 60_000 {
		t.Fatalf("regrouped entry %+v", e)
	}
	if len(l.Newest(2)) != 2 || len(l.Newest(0)) != 0 {
		t.Fatal("Newest ignores its count")
	}
	l.Reset()
	if len(l.Newest(10)) != 0 {
		t.Fatal("Reset left entries")
	}
	if CtxMulti.String() != "multi" || CtxLua.String() != "lua" || ReasonName(DeniedAuth) != "auth" {
		t.Fatal("names")
	}
}
