package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/internal/redact"
	"github.com/edgeagent/edgeagent/protocol"
)

// apkCommands are "apk add" and "apk list": the APKs install_app steps
// install, through the HTTP API (docs/api.md, APKs).
func (m *mgmt) apkCommands() []*cli.Command {
	return []*cli.Command{m.apkAddCommand(), m.apkListCommand()}
}

// apkClient waits at most ten minutes for the reply to an upload once its
// body is sent (the coordinator copies the APK inside the bucket), and
// as long as the body keeps going out.
var apkClient = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	ResponseHeaderTimeout: 10 * time.Minute,
	TLSHandshakeTimeout:   10 * time.Second,
	IdleConnTimeout:       90 * time.Second,
}}

func (m *mgmt) apkAddCommand() *cli.Command {
	var (
		ac                 apiClientFlags
		pkg, versionName   string
		versionCode        int64
		versionCodeWasSeen bool
	)
	return &cli.Command{
		Name:      "apk add",
		Summary:   "store an APK in the coordinator's bucket for install_app steps, and print its SHA-256",
		Args:      "FILE",
		CheckArgs: cli.ExactArgs(1, "FILE"),
		JSON:      true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			ac.define(fs)
			fs.StringVar(&pkg, "package", "", "the APK's `package` name, such as com.example.shop (required; checked on the phone after each install)")
			fs.Func("version-code", "the APK's versionCode, a whole `number` (required; each install fails unless the phone then reports it)", func(s string) error {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return fmt.Errorf("%q is not a whole number", s)
				}
				versionCode, versionCodeWasSeen = n, true
				return nil
			})
			fs.StringVar(&versionName, "version-name", "", "the APK's versionName, for display (such as 5.2.0)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if pkg == "" {
				return c.Usagef("--package is required")
			}
			if !versionCodeWasSeen {
				return c.Usagef("--version-code is required")
			}
			decl := protocol.APK{SHA256: strings.Repeat("0", 64), Size: 1, Package: pkg, VersionCode: versionCode, VersionName: versionName}
			if err := decl.Validate(); err != nil {
				flagName, rest, _ := strings.Cut(err.Error(), ": ")
				return c.Usagef("--%s: %s", strings.ReplaceAll(flagName, "_", "-"), rest)
			}
			f, err := os.Open(c.Args[0])
			if err != nil {
				return c.Usagef("%v", err)
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				return c.Usagef("%v", err)
			}
			if !fi.Mode().IsRegular() {
				return c.Usagef("%s is not a file", c.Args[0])
			}
			if fi.Size() > protocol.MaxAPKSize {
				return c.Usagef("%s: %d bytes is more than the %d an APK may have", c.Args[0], fi.Size(), int64(protocol.MaxAPKSize))
			}
			magic := make([]byte, 4)
			if _, err := f.ReadAt(magic, 0); err != nil || string(magic) != "PK\x03\x04" {
				return c.Usagef("%s is not an APK (an APK is a zip file, starting with PK)", c.Args[0])
			}
			base, token, err := ac.resolve(m, c)
			if err != nil {
				return err
			}
			q := url.Values{"package": {pkg}, "version_code": {strconv.FormatInt(versionCode, 10)}}
			if versionName != "" {
				q.Set("version_name", versionName)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/apks?"+q.Encode(), f)
			if err != nil {
				return err
			}
			req.ContentLength = fi.Size()
			req.Header.Set("Content-Type", api.ContentTypeAPK)
			var rec jobstore.APKRecord
			status, err := apiCall(apkClient, req, token, &rec)
			switch {
			case err != nil && (status == http.StatusUnprocessableEntity || status == http.StatusRequestEntityTooLarge):
				return c.Usagef("%s: %v", c.Args[0], err)
			case err != nil:
				return c.Failf("apk add: %v", err)
			}
			if c.JSON {
				return c.PrintJSON(rec)
			}
			what := "stored"
			if status == http.StatusOK {
				what = "was stored already"
			}
			fmt.Fprintf(c.Stderr, "apk %s versionCode %d (%d bytes) %s; install it with the step {op: install_app, apk: %s}\n",
				rec.Package, rec.VersionCode, rec.Size, what, rec.SHA256)
			_, err = fmt.Fprintln(c.Stdout, rec.SHA256)
			return err
		},
	}
}

func (m *mgmt) apkListCommand() *cli.Command {
	var ac apiClientFlags
	return &cli.Command{
		Name:    "apk list",
		Summary: "list the APKs stored for install_app steps, newest first",
		JSON:    true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			ac.define(fs)
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			var list api.APKList
			if err := m.apiGet(ctx, c, &ac, "/api/v1/apks", &list); err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(list)
			}
			tw := c.Table()
			fmt.Fprintln(tw, "SHA256\tPACKAGE\tVERSION CODE\tVERSION NAME\tSIZE\tADDED\tBY")
			for _, a := range list.APKs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", a.SHA256, a.Package, a.VersionCode, a.VersionName, a.Size,
					a.AddedAt.UTC().Format(time.RFC3339), a.AddedBy)
			}
			return tw.Flush()
		},
	}
}

// apiCall sends req with the token and decodes a 2xx JSON reply into out;
// another reply is an error quoting the problem's detail.
func apiCall(client *http.Client, req *http.Request, token string, out any) (int, error) {
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%v", redact.Error(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read the reply: %v", redact.Error(err))
	}
	if resp.StatusCode/100 != 2 {
		var p api.Problem
		if json.Unmarshal(b, &p) == nil && p.Detail != "" {
			return resp.StatusCode, fmt.Errorf("the API answered %d: %s", resp.StatusCode, p.Detail)
		}
		return resp.StatusCode, fmt.Errorf("the API answered %s", resp.Status)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return resp.StatusCode, fmt.Errorf("the reply is not what the API sends: %v", err)
	}
	return resp.StatusCode, nil
}
