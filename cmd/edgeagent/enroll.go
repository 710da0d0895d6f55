package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/installer"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/internal/enroll"
	"github.com/edgeagent/edgeagent/systemd"
)

// credsFileName is the creds file edgeagent enroll writes beside the
// config.
const credsFileName = "nats.creds"

// enrollTimeout bounds the enrollment request.
const enrollTimeout = 30 * time.Second

// maxEnrollReply bounds the coordinator's answer.
const maxEnrollReply = 64 << 10

// enrollCommand makes this PC an agent of a coordinator with a one-time
// code (docs/operations.md, "Add a PC"): it makes the agent's NATS key pair
// here (the seed never leaves the PC), sends the public key with the code,
// and writes the creds file and a complete config from the answer.
func (a *app) enrollCommand() *cli.Command {
	var (
		coordinator, configPath string
		install                 bool
	)
	return &cli.Command{
		Name:      "enroll",
		Summary:   "make this PC an agent of a coordinator with a one-time code from edgecoord agent enroll",
		Args:      "CODE",
		CheckArgs: cli.ExactArgs(1, "CODE"),
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&coordinator, "coordinator", "", "the coordinator's API `URL` (https://fleet.example.com) (required)")
			fs.StringVar(&configPath, "c", config.DefaultAgentFile, "write the configuration to `file`; the creds file "+credsFileName+" goes beside it")
			fs.BoolVar(&install, "install", false, "install and start the service with the new configuration (edgeagent install, then start)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			code, err := enroll.Parse(c.Args[0])
			if err != nil {
				return c.Usagef("CODE: %v", err)
			}
			u, err := url.Parse(coordinator)
			if coordinator == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
				return c.Usagef("--coordinator: want the coordinator's API URL, https://host[:port]")
			}
			if u.Scheme == "http" {
				c.Warnf("the code goes to %s over plain http: use https outside a test", u.Host)
			}
			credsPath := filepath.Join(filepath.Dir(configPath), credsFileName)
			for _, p := range []string{configPath, credsPath} {
				if _, err := os.Stat(p); err == nil {
					return c.Usagef("%s exists: enrolling writes a new one; move it away first", p)
				}
			}
			if err := os.MkdirAll(filepath.Dir(configPath), 0o750); err != nil {
				return c.Failf("%v", err)
			}
			kp, err := nkeys.CreateUser()
			if err != nil {
				return err
			}
			pub, _ := kp.PublicKey()
			resp, err := requestEnrollment(ctx, strings.TrimSuffix(coordinator, "/")+enroll.Path, enroll.Request{Code: code, PublicKey: pub})
			var refused *enrollRefused
			switch {
			case errors.As(err, &refused) && refused.status/100 == 4 && refused.status != http.StatusTooManyRequests:
				return c.Usagef("the coordinator refused the code: %s", refused.detail)
			case err != nil:
				return c.Failf("%v", err)
			}
			if err := writeEnrollment(configPath, credsPath, kp, resp); err != nil {
				return c.Failf("%v", err)
			}
			fmt.Fprintf(c.Stdout, "enrolled as agent %s: wrote %s and %s\n", resp.AgentID, configPath, credsPath)
			if install {
				ic := &installCommand{app: a, configPath: configPath}
				if err := ic.run(ctx, nil); err != nil {
					return c.Failf("install the service: %v", err)
				}
				cc := &controlCommand{app: a, verb: "start", do: (*installer.Service).Start, done: "started service %s"}
				return cc.run(ctx, nil)
			}
			return nil
		},
	}
}

// enrollRefused is a problem document the coordinator answered with.
type enrollRefused struct {
	status int
	detail string
}

func (e *enrollRefused) Error() string {
	return fmt.Sprintf("the coordinator answered %d: %s", e.status, e.detail)
}

// requestEnrollment sends req and reads the answer, bounded in time and
// size.
func requestEnrollment(ctx context.Context, endpoint string, req enroll.Request) (enroll.Response, error) {
	var out enroll.Response
	body, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	ctx, cancel := context.WithTimeout(ctx, enrollTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	hr.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		return out, fmt.Errorf("enroll: %w", err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxEnrollReply+1))
	if err != nil {
		return out, fmt.Errorf("enroll: read the answer: %w", err)
	}
	if len(data) > maxEnrollReply {
		return out, errors.New("enroll: the coordinator's answer is too large")
	}
	if res.StatusCode != http.StatusOK {
		var p struct {
			Detail string `json:"detail"`
		}
		if json.Unmarshal(data, &p) != nil || p.Detail == "" {
			p.Detail = http.StatusText(res.StatusCode)
		}
		return out, &enrollRefused{status: res.StatusCode, detail: p.Detail}
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("enroll: the coordinator's answer: %w", err)
	}
	return out, nil
}

// writeEnrollment writes the creds file and the config (both 0600), the
// config only once the agent's own loader accepts it; on any failure
// nothing is left behind.
func writeEnrollment(configPath, credsPath string, kp nkeys.KeyPair, resp enroll.Response) (err error) {
	uc, err := jwt.DecodeUserClaims(resp.UserJWT)
	pub, _ := kp.PublicKey()
	if err != nil || uc.Subject != pub {
		return errors.New("enroll: the coordinator's user JWT is not for this PC's key")
	}
	seed, err := kp.Seed()
	if err != nil {
		return err
	}
	creds, err := jwt.FormatUserConfig(resp.UserJWT, seed)
	if err != nil {
		return err
	}
	absCreds, err := filepath.Abs(credsPath)
	if err != nil {
		return err
	}
	cfg := map[string]any{
		"agent_id": resp.AgentID,
		"nats":     map[string]any{"url": resp.NATSURL, "creds_file": absCreds},
		"storage":  map[string]any{"mode": config.StoragePresigned},
	}
	if resp.UpdatePublicKey != "" {
		cfg["update"] = map[string]any{"public_key": resp.UpdatePublicKey}
	}
	text, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	text = append([]byte("# Written by edgeagent enroll; examples/agent.yaml lists every option.\n"), text...)
	if err := writeNew(credsPath, creds); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(credsPath)
		}
	}()
	tmp := configPath + ".new"
	if err := writeNew(tmp, text); err != nil {
		return err
	}
	defer os.Remove(tmp)
	if _, err := config.LoadAgent(tmp); err != nil {
		return fmt.Errorf("enroll: the config made from the coordinator's answer is not valid: %w", err)
	}
	if err := ownForService(credsPath, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, configPath)
}

// ownForService gives files to the service's user (systemd.AgentUser)
// when root enrolls on a system where that user exists (the .deb or
// edgeagent install made it), so that the service can read its config and
// creds while they stay mode 0600. Otherwise they stay the caller's.
func ownForService(paths ...string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(systemd.AgentUser)
	if err != nil {
		return nil
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, uid, gid); err != nil {
			return fmt.Errorf("enroll: give %s to user %s: %w", p, systemd.AgentUser, err)
		}
	}
	return nil
}

// writeNew writes a new file readable by its owner alone.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
