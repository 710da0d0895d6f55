package capture_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/internal/fakeadbd"
	"github.com/edgeagent/edgeagent/internal/testenv"
)

// BenchmarkScreenshot compares, on the same fake phone behind the same real
// adb server in the same run, three ways to get a PNG screenshot:
//
//   - host-raw: this package's path: raw screencap over exec: through the
//     host protocol, decoded and PNG-encoded on the PC (ADBDevice.Screenshot);
//   - host-png: `screencap -p` over exec: through the host protocol (PNG
//     encoded on the phone), no process;
//   - exec-out-png: the adb binary run once per shot as
//     `adb -s SERIAL exec-out screencap -p`.
//
// Run: go test -run '^$' -bench BenchmarkScreenshot -benchtime 3s ./capture
func BenchmarkScreenshot(b *testing.B) {
	srv := testenv.StartADB(b)
	for _, size := range []struct{ w, h int }{{720, 1280}, {1080, 2400}} {
		p, err := fakeadbd.Start(fakeadbd.Options{Width: size.w, Height: size.h})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		srv.Connect(b, p.Addr(), "device")
		ctx := context.Background()
		opts := capture.ADBOptions{Address: srv.Addr, ADBPath: srv.Path}
		dev, err := capture.NewADBDevice(ctx, opts, p.Serial())
		if err != nil {
			b.Fatal(err)
		}
		client := adb.New(adb.Options{Addr: srv.Addr, NoStart: true})
		name := fmt.Sprintf("%dx%d", size.w, size.h)

		report := func(b *testing.B, bytes int64) {
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "shots/s")
			b.ReportMetric(float64(bytes)/float64(b.N), "png-bytes/shot")
		}
		b.Run(name+"/host-raw", func(b *testing.B) {
			var n int64
			for b.Loop() {
				png, err := dev.Screenshot(ctx)
				if err != nil {
					b.Fatal(err)
				}
				n += int64(len(png))
			}
			report(b, n)
		})
		b.Run(name+"/host-png", func(b *testing.B) {
			var n int64
			for b.Loop() {
				png, err := client.Exec(ctx, p.Serial(), "screencap -p", 64<<20)
				if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
					b.Fatalf("screencap -p: %v", err)
				}
				n += int64(len(png))
			}
			report(b, n)
		})
		b.Run(name+"/exec-out-png", func(b *testing.B) {
			var n int64
			for b.Loop() {
				cmd := srv.Command(ctx, "-s", p.Serial(), "exec-out", "screencap", "-p")
				out, err := cmd.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				m, err := io.Copy(io.Discard, out)
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
				n += m
			}
			report(b, n)
		})
	}
}
