package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// LoadAgent reads the agent config file at path, decodes it over the
// defaults, expands environment variables, validates the result and reads
// file-based secrets. Problems with the file's content are returned as
// [Problems], every one of them; other failures, such as an unreadable file,
// as a plain error.
func LoadAgent(path string) (*Agent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg := DefaultAgent()
	literal, err := load(path, data, cfg, &cfg.warnings)
	if err != nil {
		return nil, err
	}
	cfg.warnings = append(cfg.warnings, configFileWarnings(path, literal)...)
	cfg.warnings = append(cfg.warnings, cfg.unusedWarnings()...)
	return cfg, nil
}

// ParseAgent is LoadAgent for a config already in memory; name is used in
// problem positions and as the base of relative file names.
func ParseAgent(name string, data []byte) (*Agent, error) {
	cfg := DefaultAgent()
	if _, err := load(name, data, cfg, &cfg.warnings); err != nil {
		return nil, err
	}
	cfg.warnings = append(cfg.warnings, cfg.unusedWarnings()...)
	return cfg, nil
}

// LoadCoordinator reads the coordinator config file at path, decodes it over
// the defaults, expands environment variables, validates the result and
// reads file-based secrets. Problems with the file's content are returned as
// [Problems], every one of them; other failures, such as an unreadable file,
// as a plain error.
func LoadCoordinator(path string) (*Coordinator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg := DefaultCoordinator()
	literal, err := load(path, data, cfg, &cfg.warnings)
	if err != nil {
		return nil, err
	}
	cfg.warnings = append(cfg.warnings, configFileWarnings(path, literal)...)
	return cfg, nil
}

// ParseCoordinator is LoadCoordinator for a config already in memory; name
// is used in problem positions and as the base of relative file names.
func ParseCoordinator(name string, data []byte) (*Coordinator, error) {
	cfg := DefaultCoordinator()
	if _, err := load(name, data, cfg, &cfg.warnings); err != nil {
		return nil, err
	}
	return cfg, nil
}

// config is what the loading pipeline needs from Agent and Coordinator.
type config interface {
	Validate() error
	resolvePaths(dir string)
	readSecrets(ps *Problems, warnings *[]string)
}

var (
	_ config = (*Agent)(nil)
	_ config = (*Coordinator)(nil)
)

// load runs the pipeline on cfg, which holds the defaults: strict decode
// with environment expansion, relative paths, Validate, secret files. It
// reports whether the file itself holds a secret.
func load(name string, data []byte, cfg config, warnings *[]string) (literalSecret bool, err error) {
	d := newDecoder(name, os.LookupEnv)
	d.decode(data, cfg)
	ps := d.problems
	if slices.Contains(d.failed, "") {
		return false, ps.Err() // nothing was decoded; Validate would only repeat it
	}
	cfg.resolvePaths(filepath.Dir(name))
	if err := cfg.Validate(); err != nil {
		var vps Problems
		if !errors.As(err, &vps) {
			return false, fmt.Errorf("validate config: %w", err)
		}
		for _, p := range vps {
			if coveredByAny(d.failed, p.Path) {
				continue
			}
			ps = append(ps, d.place(p))
		}
	}
	if len(ps) == 0 {
		var sps Problems
		cfg.readSecrets(&sps, warnings)
		for _, p := range sps {
			ps = append(ps, d.place(p))
		}
	}
	ps.sortByPosition()
	return d.literalSecret, ps.Err()
}

// place gives a problem found after decoding the file name and the position
// of its path.
func (d *decoder) place(p Problem) Problem {
	p.File = d.file
	if pos, ok := d.pos[p.Path]; ok {
		p.Line, p.Col = pos.line, pos.col
	}
	return p
}

func coveredByAny(parents []string, path string) bool {
	for _, parent := range parents {
		if covers(parent, path) {
			return true
		}
	}
	return false
}

// configFileWarnings warns about a config file that holds a secret and can
// be read by other users.
func configFileWarnings(path string, literalSecret bool) []string {
	if !literalSecret {
		return nil
	}
	if mode, ok := readableByOthers(path); ok {
		return []string{fmt.Sprintf("%s holds a secret and is readable by group or others (mode %04o); restrict it (chmod 600) or take the secret from ${ENV} or a *_file", path, mode.Perm())}
	}
	return nil
}
