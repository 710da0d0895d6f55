// Command servicetest stands in for edgeagent in the installer's Wine test:
// it installs and controls itself as the edgeagent service, and when the
// service control manager starts it with "run -c FILE" it runs under
// installer.RunService, appending what happens to FILE.events: "started"
// when it starts, "cancelled" when its context is cancelled, then, after a
// one-and-a-half-second drain, "drained".
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/edgeagent/edgeagent/installer"
)

// drain is how long the stand-in takes to stop once cancelled.
const drain = 1500 * time.Millisecond

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "servicetest: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 3 && args[0] == "run" && args[1] == "-c" {
		if !installer.IsService() {
			return fmt.Errorf("run: not started by the service control manager")
		}
		return installer.RunService(installer.Name, func(ctx context.Context, stderr io.Writer) error {
			return serve(ctx, stderr, args[2]+".events")
		})
	}
	if len(args) == 0 {
		return fmt.Errorf("usage: servicetest install CONFIG | start | stop | status | uninstall")
	}
	opts := installer.Options{}
	if args[0] == "install" && len(args) == 2 {
		opts.ConfigPath = args[1]
	}
	svc, err := installer.New(opts)
	if err != nil {
		return err
	}
	switch args[0] {
	case "install":
		err = svc.Install()
	case "start":
		err = svc.Start()
	case "stop":
		err = svc.Stop()
	case "uninstall":
		err = svc.Uninstall()
	case "status":
		var st installer.Status
		if st, err = svc.Status(); err == nil {
			fmt.Println(st)
		}
	default:
		err = fmt.Errorf("unknown command %q", args[0])
	}
	return err
}

func serve(ctx context.Context, stderr io.Writer, events string) error {
	record := func(what string) {
		f, err := os.OpenFile(events, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "record %s: %v\n", what, err)
			return
		}
		fmt.Fprintln(f, what)
		f.Close()
	}
	record("started")
	fmt.Fprintln(stderr, `{"level":"info","message":"stand-in running"}`)
	<-ctx.Done()
	record("cancelled")
	time.Sleep(drain)
	fmt.Fprintln(stderr, `{"level":"warn","message":"stand-in drained"}`)
	record("drained")
	return nil
}
