//go:build !linux && !windows

package installer

import (
	"errors"
	"runtime"

	"github.com/kardianos/service"
)

const defaultUser = ""

var errUnsupported = errors.New("edgeagent installs as a service on Linux (systemd) and Windows only, not on " + runtime.GOOS)

func checkPlatform() error                          { return errUnsupported }
func (s *Service) config() (*service.Config, error) { return s.serviceConfig(), nil }
func (s *Service) describe() (string, error)        { return "", errUnsupported }
func (s *Service) install() error                   { return errUnsupported }
func (s *Service) checkUninstall() error            { return errUnsupported }
func (s *Service) uninstall() error                 { return errUnsupported }
func (s *Service) stop() error                      { return errUnsupported }
func isNoSuchService(error) bool                    { return false }
