//go:build !linux && !windows

package power

type impl struct{}

func open(Options) (*impl, error) { return nil, ErrUnsupported }

func (*impl) hold(bool, string) error { return ErrUnsupported }
func (*impl) held() bool              { return false }
func (*impl) close() error            { return nil }
