package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCaptureWritesTheProfileAndTheTraceAskedFor(t *testing.T) {
	dir := t.TempDir()
	prof, tr := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "run.trace")
	stop, err := capture(prof, tr)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range 1_000_000 {
		n += i % 7
	}
	stop()
	for _, f := range []string{prof, tr} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() == 0 {
			t.Errorf("%s is empty", f)
		}
	}
	// Both were stopped: they can start again.
	stop, err = capture(filepath.Join(dir, "again.prof"), filepath.Join(dir, "again.trace"))
	if err != nil {
		t.Fatalf("after stop: %v (n %d)", err, n)
	}
	stop()
}

func TestCaptureNamesTheFlagWhoseFileItCannotCreate(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such", "dir")
	if _, err := capture(filepath.Join(missing, "cpu.prof"), ""); err == nil || !strings.HasPrefix(err.Error(), "-cpuprofile: ") {
		t.Errorf("a profile it cannot create: %v, want an error naming -cpuprofile", err)
	}
	// A trace that cannot start leaves no profile running: the next
	// capture can profile.
	if _, err := capture(filepath.Join(t.TempDir(), "cpu.prof"), filepath.Join(missing, "run.trace")); err == nil || !strings.HasPrefix(err.Error(), "-trace: ") {
		t.Errorf("a trace it cannot create: %v, want an error naming -trace", err)
	}
	stop, err := capture(filepath.Join(t.TempDir(), "cpu2.prof"), "")
	if err != nil {
		t.Fatalf("the profile left running: %v", err)
	}
	stop()
	stop, err = capture("", "")
	if err != nil {
		t.Fatal(err)
	}
	stop() // nothing to stop
}
