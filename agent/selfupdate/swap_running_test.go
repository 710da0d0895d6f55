package selfupdate

import (
	"bytes"
	"os"
	"runtime"
	"testing"
)

// TestSwapRunningWindows swaps the running test binary itself, as the
// agent swaps its own .exe: Windows refuses to replace a running program
// but lets it be renamed, so the running .exe is renamed aside to .prev
// and the new file takes its name; the rollback renames that aside
// (.failed) and puts .prev, still running, back. wine_test.go runs it
// under Wine.
func TestSwapRunningWindows(t *testing.T) {
	if runtime.GOOS != "windows" {
		t.Skip("the running binary's swap on Windows (wine_test.go runs it under Wine)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	newBin := []byte("MZ the next release")
	if err := os.WriteFile(self+NewSuffix, newBin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Swap(self, self+NewSuffix); err != nil {
		t.Fatalf("swap the running binary: %v", err)
	}
	if b, _ := os.ReadFile(self); !bytes.Equal(b, newBin) {
		t.Fatalf("after the swap the binary's name holds %d bytes, not the new binary", len(b))
	}
	if b, _ := os.ReadFile(self + PrevSuffix); !bytes.Equal(b, orig) {
		t.Fatalf("after the swap %s holds %d bytes, not the running binary's %d", PrevSuffix, len(b), len(orig))
	}
	if err := Rollback(self); err != nil {
		t.Fatalf("roll back to the running binary: %v", err)
	}
	if b, _ := os.ReadFile(self); !bytes.Equal(b, orig) {
		t.Fatalf("after the rollback the binary's name holds %d bytes, not the previous binary", len(b))
	}
	if b, _ := os.ReadFile(self + FailedSuffix); !bytes.Equal(b, newBin) {
		t.Fatalf("the rolled-back binary is not kept aside as %s", FailedSuffix)
	}
	t.Logf("swapped and rolled back the running %s", self)
}
