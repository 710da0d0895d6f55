package capture_test

import (
	"context"
	"fmt"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// A job's use of the package: lock a matching phone, run the steps, and end
// with the operation log as the last artifact.
func Example() {
	inv := capture.NewInventory()
	_ = inv.Add(capture.NewSimulated(capture.SimOptions{Serial: "sim-1", Model: "Pixel 7", Tags: []string{"eu"}}))

	job := context.Background() // in the agent: the context of the job's lease guard
	task := protocol.Task{
		Device: protocol.DeviceSelector{Tags: []string{"eu"}},
		Steps: []protocol.Step{
			{Op: protocol.OpLaunch, Package: "com.example.shop"},
			{Op: protocol.OpText, Text: "secret"},
			{Op: protocol.OpScreenshot},
			{Op: protocol.OpUIDump, Name: "tree"},
		},
	}
	dev, release, err := inv.AcquireMatching(job, task.Device)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer release()
	log := capture.NewOpLog(capture.OpLogOptions{})
	r := capture.NewRunner(job, dev, capture.RunnerOptions{OpLog: log})
	defer r.Close()
	for _, s := range task.Steps {
		out, err := r.RunStep(job, s)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, a := range out.Artifacts {
			fmt.Println(out.Seq, a.Name, a.ContentType) // upload, then register
		}
	}
	a := log.Artifact()
	fmt.Println(a.Name, a.ContentType, log.Len())
	// Output:
	// 3 screenshot-003.png image/png
	// 4 tree.xml application/xml
	// oplog.jsonl application/x-ndjson 4
}
