//go:build unix

package procs

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestKillTakesGrandchildren: a process that started a child of its own is
// killed together with that child.
func TestKillTakesGrandchildren(t *testing.T) {
	g := NewGroup()
	ctx := WithGroup(context.Background(), g)
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := Start(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != 1 || !alive(child) {
		t.Fatalf("group has %d processes, child alive %v", g.Len(), alive(child))
	}
	if n := g.Kill(); n != 1 {
		t.Fatalf("Kill() = %d, want 1", n)
	}
	if err := Wait(ctx, cmd); err == nil {
		t.Fatal("killed process exited cleanly")
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d survived the kill", child)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if g.Len() != 0 {
		t.Fatalf("group still holds %d processes", g.Len())
	}
	if err := g.Start(exec.Command("true")); !errors.Is(err, ErrKilled) {
		t.Fatalf("Start after Kill = %v, want ErrKilled", err)
	}
}

func TestStartWithoutGroupKilledWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.Command("sleep", "300")
	if err := Start(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := Wait(ctx, cmd); err == nil {
		t.Fatal("process survived its context")
	}
}
