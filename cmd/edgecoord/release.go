package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/protocol"
)

// releaseCommands are "release keygen", "release add" and "release list":
// signed agent binaries (docs/releases.md), stored through the HTTP API.
func (m *mgmt) releaseCommands() []*cli.Command {
	return []*cli.Command{releaseKeygenCommand(), m.releaseAddCommand(), m.releaseListCommand()}
}

func releaseKeygenCommand() *cli.Command {
	var out string
	return &cli.Command{
		Name:    "release keygen",
		Summary: "make a release signing key: the private key into a new file (0600), the public key for agents' update.public_key on standard output",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&out, "o", "", "write the private key to `file`, which must not exist (required; keep it offline)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if out == "" {
				return c.Usagef("-o FILE is required: where to write the private key")
			}
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return c.Failf("release keygen: %v", err)
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return c.Usagef("-o: %v (an existing key is never overwritten)", err)
			}
			text := protocol.ReleaseSeedKeyPrefix + base64.StdEncoding.EncodeToString(priv.Seed()) + "\n"
			if _, err := f.WriteString(text); err != nil {
				f.Close()
				os.Remove(out)
				return c.Failf("release keygen: write %s: %v", out, err)
			}
			if err := errors.Join(f.Sync(), f.Close()); err != nil {
				os.Remove(out)
				return c.Failf("release keygen: write %s: %v", out, err)
			}
			fmt.Fprintf(c.Stderr, "private key written to %s (keep it offline); put the public key below in each agent's config as update.public_key\n", out)
			_, err = fmt.Fprintln(c.Stdout, protocol.FormatReleaseKey(pub))
			return err
		},
	}
}

// maxKeyFile bounds a release key file.
const maxKeyFile = 4 << 10

// readReleaseKey reads a private key file written by release keygen.
func readReleaseKey(path string) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	bad := fmt.Errorf("%s: unknown key file format: want %s followed by the base64 of a 32-byte seed, as edgecoord release keygen writes", path, protocol.ReleaseSeedKeyPrefix)
	if len(b) > maxKeyFile {
		return nil, bad
	}
	b64, ok := strings.CutPrefix(strings.TrimSpace(string(b)), protocol.ReleaseSeedKeyPrefix)
	if !ok {
		if strings.HasPrefix(strings.TrimSpace(string(b)), protocol.ReleaseKeyPrefix) {
			return nil, fmt.Errorf("%s is a public key: sign with the private key file release keygen -o wrote", path)
		}
		return nil, bad
	}
	seed, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, bad
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// binaryPlatform reads the GOOS and GOARCH a binary was built for from
// its headers (ELF, PE or Mach-O).
func binaryPlatform(r io.ReaderAt) (goos, goarch string, err error) {
	if f, err := elf.NewFile(r); err == nil {
		defer f.Close()
		switch f.OSABI {
		case elf.ELFOSABI_FREEBSD:
			goos = "freebsd"
		case elf.ELFOSABI_NETBSD:
			goos = "netbsd"
		case elf.ELFOSABI_OPENBSD:
			goos = "openbsd"
		default:
			goos = "linux"
		}
		le := f.ByteOrder == binary.LittleEndian
		switch {
		case f.Machine == elf.EM_X86_64:
			goarch = "amd64"
		case f.Machine == elf.EM_386:
			goarch = "386"
		case f.Machine == elf.EM_AARCH64:
			goarch = "arm64"
		case f.Machine == elf.EM_ARM:
			goarch = "arm"
		case f.Machine == elf.EM_RISCV && f.Class == elf.ELFCLASS64:
			goarch = "riscv64"
		case f.Machine == elf.EM_PPC64 && le:
			goarch = "ppc64le"
		case f.Machine == elf.EM_PPC64:
			goarch = "ppc64"
		case f.Machine == elf.EM_S390:
			goarch = "s390x"
		case f.Machine == elf.EM_LOONGARCH:
			goarch = "loong64"
		case f.Machine == elf.EM_MIPS && f.Class == elf.ELFCLASS64 && le:
			goarch = "mips64le"
		case f.Machine == elf.EM_MIPS && f.Class == elf.ELFCLASS64:
			goarch = "mips64"
		case f.Machine == elf.EM_MIPS && le:
			goarch = "mipsle"
		case f.Machine == elf.EM_MIPS:
			goarch = "mips"
		default:
			return "", "", fmt.Errorf("an ELF binary for machine %v, which is no Go architecture", f.Machine)
		}
		return goos, goarch, nil
	}
	if f, err := pe.NewFile(r); err == nil {
		defer f.Close()
		switch f.Machine {
		case pe.IMAGE_FILE_MACHINE_AMD64:
			return "windows", "amd64", nil
		case pe.IMAGE_FILE_MACHINE_I386:
			return "windows", "386", nil
		case pe.IMAGE_FILE_MACHINE_ARM64:
			return "windows", "arm64", nil
		case pe.IMAGE_FILE_MACHINE_ARMNT:
			return "windows", "arm", nil
		}
		return "", "", fmt.Errorf("a PE binary for machine %#x, which is no Go architecture", f.Machine)
	}
	if f, err := macho.NewFile(r); err == nil {
		defer f.Close()
		switch f.Cpu {
		case macho.CpuAmd64:
			return "darwin", "amd64", nil
		case macho.CpuArm64:
			return "darwin", "arm64", nil
		}
		return "", "", fmt.Errorf("a Mach-O binary for CPU %v, which is no Go architecture", f.Cpu)
	}
	if _, err := macho.NewFatFile(r); err == nil {
		return "", "", errors.New("a universal Mach-O binary: add the binary of each architecture on its own")
	}
	return "", "", errors.New("not an executable (ELF, PE or Mach-O)")
}

// releaseFile is one binary of release add, read and signed.
type releaseFile struct {
	path string
	f    *os.File
	rel  protocol.Release
}

// readReleaseFile opens path and makes its release of version, signed.
func readReleaseFile(path, version string, key ed25519.PrivateKey) (*releaseFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fail := func(format string, a ...any) (*releaseFile, error) {
		f.Close()
		return nil, fmt.Errorf("%s: "+format, append([]any{path}, a...)...)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		return fail("%v", err)
	case !fi.Mode().IsRegular():
		return fail("not a file")
	case fi.Size() == 0:
		return fail("empty: not a binary")
	case fi.Size() > protocol.MaxReleaseSize:
		return fail("%d bytes is more than the %d a release binary may have", fi.Size(), int64(protocol.MaxReleaseSize))
	}
	goos, goarch, err := binaryPlatform(f)
	if err != nil {
		return fail("%v", err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size())); err != nil {
		return fail("%v", err)
	}
	rel := protocol.Release{Version: version, OS: goos, Arch: goarch, Size: fi.Size(), SHA256: protocol.HexSHA256([32]byte(h.Sum(nil)))}
	if err := rel.Validate(); err != nil {
		return fail("%v", err)
	}
	rel.Sign(key)
	return &releaseFile{path: path, f: f, rel: rel}, nil
}

func (m *mgmt) releaseAddCommand() *cli.Command {
	var (
		ac               apiClientFlags
		version, keyPath string
	)
	return &cli.Command{
		Name:    "release add",
		Summary: "sign agent binaries of a version with the release key and store them in the coordinator's bucket, one per OS and architecture (read from each binary)",
		Args:    "FILE...",
		CheckArgs: func(args []string) error {
			if len(args) == 0 {
				return errors.New("want one or more FILE: the agent binaries")
			}
			return nil
		},
		JSON: true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			ac.define(fs)
			fs.StringVar(&version, "version", "", "the `version` the binaries were built with, such as v1.4.0 (required)")
			fs.StringVar(&keyPath, "sign", "", "the private key `file` release keygen wrote (required)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if version == "" {
				return c.Usagef("--version is required")
			}
			v, err := jobstore.CanonicalVersion(version)
			if err != nil {
				return c.Usagef("--version: %v", err)
			}
			if keyPath == "" {
				return c.Usagef("--sign KEY is required: the private key file release keygen wrote")
			}
			key, err := readReleaseKey(keyPath)
			if err != nil {
				return c.Usagef("--sign: %v", err)
			}
			// Every file is read and signed before any is sent: a bad one
			// stores none.
			var files []*releaseFile
			defer func() {
				for _, rf := range files {
					rf.f.Close()
				}
			}()
			seen := map[string]string{}
			for _, p := range c.Args {
				rf, err := readReleaseFile(p, v, key)
				if err != nil {
					return c.Usagef("%v", err)
				}
				files = append(files, rf)
				plat := rf.rel.OS + "/" + rf.rel.Arch
				if prev, dup := seen[plat]; dup {
					return c.Usagef("%s and %s are both %s binaries: one per OS and architecture", prev, p, plat)
				}
				seen[plat] = p
			}
			base, token, err := ac.resolve(m, c)
			if err != nil {
				return err
			}
			var recs []jobstore.ReleaseRecord
			for _, rf := range files {
				rec, status, err := postRelease(ctx, base, token, rf)
				switch {
				case err != nil && (status == http.StatusUnprocessableEntity || status == http.StatusConflict || status == http.StatusRequestEntityTooLarge):
					return c.Usagef("%s: %v", rf.path, err)
				case err != nil:
					return c.Failf("release add %s: %v", rf.path, err)
				}
				what := "stored"
				if status == http.StatusOK {
					what = "was stored already"
				}
				fmt.Fprintf(c.Stderr, "release %s %s/%s (%d bytes) %s\n", rec.Version, rec.OS, rec.Arch, rec.Size, what)
				recs = append(recs, rec)
			}
			if c.JSON {
				return c.PrintJSON(api.ReleaseList{Releases: recs})
			}
			for _, rec := range recs {
				fmt.Fprintf(c.Stdout, "%s %s/%s %s\n", rec.Version, rec.OS, rec.Arch, rec.SHA256)
			}
			return nil
		},
	}
}

// postRelease sends one signed binary to POST /api/v1/releases.
func postRelease(ctx context.Context, base, token string, rf *releaseFile) (jobstore.ReleaseRecord, int, error) {
	q := url.Values{"version": {rf.rel.Version}, "os": {rf.rel.OS}, "arch": {rf.rel.Arch},
		"sha256": {rf.rel.SHA256}, "signature": {rf.rel.Signature}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/releases?"+q.Encode(), io.NewSectionReader(rf.f, 0, rf.rel.Size))
	if err != nil {
		return jobstore.ReleaseRecord{}, 0, err
	}
	req.ContentLength = rf.rel.Size
	req.Header.Set("Content-Type", "application/octet-stream")
	var rec jobstore.ReleaseRecord
	status, err := apiCall(apkClient, req, token, &rec)
	return rec, status, err
}

func (m *mgmt) releaseListCommand() *cli.Command {
	var ac apiClientFlags
	return &cli.Command{
		Name:    "release list",
		Summary: "list the stored release binaries, newest first",
		JSON:    true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			ac.define(fs)
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			var list api.ReleaseList
			if err := m.apiGet(ctx, c, &ac, "/api/v1/releases", &list); err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(list)
			}
			tw := c.Table()
			fmt.Fprintln(tw, "VERSION\tOS/ARCH\tSIZE\tSHA256\tADDED\tBY")
			for _, r := range list.Releases {
				fmt.Fprintf(tw, "%s\t%s/%s\t%d\t%s\t%s\t%s\n", r.Version, r.OS, r.Arch, r.Size, r.SHA256, r.AddedAt.UTC().Format(time.RFC3339), r.AddedBy)
			}
			return tw.Flush()
		},
	}
}

// apiGet GETs path of the API into out; a failure is reported.
func (m *mgmt) apiGet(ctx context.Context, c *cli.Call, ac *apiClientFlags, path string, out any) error {
	return m.apiDo(ctx, c, ac, http.MethodGet, path, nil, out)
}

// apiDo sends a request with a JSON body (nil: none) to the API and
// decodes its reply into out: a 422 is a usage error (exit 2), another
// failure exit 1.
func (m *mgmt) apiDo(ctx context.Context, c *cli.Call, ac *apiClientFlags, method, path string, body, out any) error {
	base, token, err := ac.resolve(m, c)
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	status, err := apiCall(exportClient, req, token, out)
	switch {
	case err != nil && status == http.StatusUnprocessableEntity:
		return c.Usagef("%v", err)
	case err != nil:
		return c.Failf("%s: %v", c.Name, err)
	}
	return nil
}
