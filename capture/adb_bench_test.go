package capture_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// BenchmarkScreenshot compares, on the same fake phone behind the same real
// adb server in the same run, three ways to get a PNG screenshot:
//
//   - host-auto: ADBDevice.Screenshot as the agent uses it: the faster of
//     the two host-protocol paths below, chosen by timing them on the phone;
//   - host-raw: raw screencap over exec: through the host protocol, decoded
//     and PNG-encoded on the PC (ADBDevice.Screenshot in raw mode);
//   - host-png: `screencap -p` over exec: through the host protocol (PNG
//     encoded on the phone), no process;
//   - exec-out-png: the adb binary run once per shot as
//     `adb -s SERIAL exec-out screencap -p`.
//
// and then all four in turn, one shot each per iteration ("interleaved"),
// so that every path sees the same load: the ratios to quote. The ways
// alone report the p50 and p99 of a shot too, and "fake" times the fake
// phone's own work for a shot: its simulated screen rendered and
// PNG-encoded in-process, with no adb in between.
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
		client := adb.New(adb.Options{Addr: srv.Addr, NoStart: true})
		name := fmt.Sprintf("%dx%d", size.w, size.h)

		report := func(b *testing.B, bytes int64) {
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "shots/s")
			b.ReportMetric(float64(bytes)/float64(b.N), "png-bytes/shot")
		}
		for _, mode := range []string{capture.ScreenshotAuto, capture.ScreenshotRaw} {
			o := opts
			o.ScreenshotMode = mode
			dev, err := capture.NewADBDevice(ctx, o, p.Serial())
			if err != nil {
				b.Fatal(err)
			}
			for range 10 { // calibration of auto mode, warm-up of raw
				if _, err := dev.Screenshot(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.Run(name+"/host-"+mode, func(b *testing.B) {
				var n int64
				took := roundTrips(b, func() error {
					png, err := dev.Screenshot(ctx)
					n += int64(len(png))
					return err
				})
				report(b, n)
				reportLatency(b, took)
			})
		}
		// The fake phone's own work for a shot: its simulated screen
		// rendered and PNG-encoded in-process, no adb in between.
		b.Run(name+"/fake", func(b *testing.B) {
			reportLatency(b, roundTrips(b, func() error {
				_, err := p.Sim().Screenshot(ctx)
				return err
			}))
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
		execOut := func(b *testing.B) int64 {
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
			return m
		}
		b.Run(name+"/exec-out-png", func(b *testing.B) {
			var n int64
			for b.Loop() {
				n += execOut(b)
			}
			report(b, n)
		})

		// The same four ways taken in turn, one shot each per iteration,
		// so that every path sees the same load on the machine: the
		// figures to compare.
		auto, err := capture.NewADBDevice(ctx, opts, p.Serial())
		if err != nil {
			b.Fatal(err)
		}
		raw := opts
		raw.ScreenshotMode = capture.ScreenshotRaw
		rawDev, err := capture.NewADBDevice(ctx, raw, p.Serial())
		if err != nil {
			b.Fatal(err)
		}
		// Calibrate auto mode first: the figures are its steady state.
		for range 10 {
			if _, err := auto.Screenshot(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(name+"/interleaved", func(b *testing.B) {
			var took [4]time.Duration
			shots := 0
			for b.Loop() {
				for i, shoot := range []func(){
					func() {
						if _, err := auto.Screenshot(ctx); err != nil {
							b.Fatal(err)
						}
					},
					func() {
						if _, err := rawDev.Screenshot(ctx); err != nil {
							b.Fatal(err)
						}
					},
					func() {
						if _, err := client.Exec(ctx, p.Serial(), "screencap -p", 64<<20); err != nil {
							b.Fatal(err)
						}
					},
					func() { execOut(b) },
				} {
					start := time.Now()
					shoot()
					took[i] += time.Since(start)
				}
				shots++
			}
			for i, name := range []string{"host-auto", "host-raw", "host-png", "exec-out-png"} {
				b.ReportMetric(float64(shots)/took[i].Seconds(), name+"-shots/s")
			}
			b.ReportMetric(took[3].Seconds()/took[0].Seconds(), "auto/exec-out")
		})
	}
}

// BenchmarkTap times ADBDevice.Tap (`input tap` over the host protocol)
// on a fake phone behind a real adb server ("adb"), and the same tap on
// the fake's simulated screen in-process ("fake": the fake's own work);
// BenchmarkWDATap is the same for an iPhone through WebDriverAgent. Each
// reports taps/s and the p50 and p99 of one tap's round trip.
//
// Run: go test -run '^$' -bench 'Tap$' -benchtime 3s ./capture
func BenchmarkTap(b *testing.B) {
	srv := testenv.StartADB(b)
	p, err := fakeadbd.Start(fakeadbd.Options{Width: 1080, Height: 2400})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	srv.Connect(b, p.Addr(), "device")
	ctx := context.Background()
	dev, err := capture.NewADBDevice(ctx, capture.ADBOptions{Address: srv.Addr, ADBPath: srv.Path}, p.Serial())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("adb", func(b *testing.B) { benchTaps(b, dev) })
	b.Run("fake", func(b *testing.B) { benchTaps(b, p.Sim()) })
}

// tapper is a phone that taps: a capture.Device, or a fake's simulated
// screen.
type tapper interface {
	Tap(ctx context.Context, x, y int) error
}

// benchTaps taps dev at the same point (outside any icon, so the screen
// stays) and reports taps per second and the latency of a tap.
func benchTaps(b *testing.B, dev tapper) {
	ctx := context.Background()
	took := roundTrips(b, func() error { return dev.Tap(ctx, 540, 1200) })
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "taps/s")
	reportLatency(b, took)
}

// roundTrips runs f once per iteration of b.Loop, failing on its error,
// and returns how long each call took.
func roundTrips(b *testing.B, f func() error) []time.Duration {
	took := make([]time.Duration, 0, 1024)
	for b.Loop() {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	return took
}

// reportLatency reports the median and the 99th percentile (nearest
// rank) of the calls' durations in milliseconds, as p50-ms and p99-ms.
func reportLatency(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	rank := func(p float64) time.Duration {
		return took[min(max(int(math.Ceil(p*float64(len(took))))-1, 0), len(took)-1)]
	}
	b.ReportMetric(float64(rank(0.50).Nanoseconds())/1e6, "p50-ms")
	b.ReportMetric(float64(rank(0.99).Nanoseconds())/1e6, "p99-ms")
}

// BenchmarkWDAScreenshot times WDADevice.Screenshot (GET /screenshot, a
// base64 PNG checked and decoded on the PC) on fake iPhones of two
// sizes ("wda"), as BenchmarkScreenshot does for Android phones: compare
// shots/s, png-bytes/shot and the p50 and p99 of a shot; "fake" is the
// fake's own work, its simulated screen rendered and PNG-encoded
// in-process.
//
// Run: go test -run '^$' -bench 'Screenshot$' -benchtime 3s ./capture
func BenchmarkWDAScreenshot(b *testing.B) {
	for _, size := range []struct{ w, h, scale int }{{375, 667, 2}, {393, 852, 3}} {
		p, err := fakewda.Start(fakewda.Options{WidthPt: size.w, HeightPt: size.h, Scale: size.scale})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		ctx := context.Background()
		dev, err := capture.OpenWDADevice(ctx, capture.WDAOptions{UDID: p.UDID(), URL: p.URL()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(dev.Close)
		name := fmt.Sprintf("%dx%d", size.w*size.scale, size.h*size.scale)
		b.Run(name+"/wda", func(b *testing.B) {
			var n int64
			took := roundTrips(b, func() error {
				png, err := dev.Screenshot(ctx)
				n += int64(len(png))
				return err
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "shots/s")
			b.ReportMetric(float64(n)/float64(b.N), "png-bytes/shot")
			reportLatency(b, took)
		})
		b.Run(name+"/fake", func(b *testing.B) {
			reportLatency(b, roundTrips(b, func() error {
				_, err := p.Screen().Screenshot(ctx)
				return err
			}))
		})
	}
}

// BenchmarkWDATap times WDADevice.Tap (a W3C tap, pixels to points) on a
// fake iPhone, to compare with BenchmarkTap.
func BenchmarkWDATap(b *testing.B) {
	p, err := fakewda.Start(fakewda.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	dev, err := capture.OpenWDADevice(context.Background(), capture.WDAOptions{UDID: p.UDID(), URL: p.URL()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(dev.Close)
	b.Run("wda", func(b *testing.B) { benchTaps(b, dev) })
	b.Run("fake", func(b *testing.B) { benchTaps(b, p.Screen()) })
}
