package adb

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Reconnect asks the server to kick the transport of the device with
// serial (`adb -s SERIAL reconnect`) and returns the server's answer
// ("reconnecting SERIAL [device]"). A USB device comes back on its own; a
// network device (one added with `adb connect`) is dropped, so adb 29
// needs a Connect after it.
func (c *Client) Reconnect(ctx context.Context, serial string) (string, error) {
	s, err := c.hostQuery(ctx, "host-serial:"+serial+":reconnect")
	if err != nil {
		return "", fmt.Errorf("reconnect %s: %w", serial, err)
	}
	return strings.TrimSpace(s), nil
}

// Connect asks the server to connect to a network device at addr
// (`adb connect ADDR`) and returns its answer ("connected to ADDR",
// "already connected to ADDR"); an answer saying it failed is an error.
func (c *Client) Connect(ctx context.Context, addr string) (string, error) {
	s, err := c.hostQuery(ctx, "host:connect:"+addr)
	if err != nil {
		return "", fmt.Errorf("connect %s: %w", addr, err)
	}
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "connected to") {
		return s, fmt.Errorf("connect %s: %s", addr, s)
	}
	return s, nil
}

// Reboot asks the device with serial to reboot (`adb -s SERIAL reboot`)
// and waits until it has taken the request (the service closes).
func (c *Client) Reboot(ctx context.Context, serial string) error {
	s, err := c.Open(ctx, serial, "reboot:")
	if err != nil {
		return fmt.Errorf("reboot %s: %w", serial, err)
	}
	defer s.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(s, 64<<10)); err != nil && ctx.Err() != nil {
		return fmt.Errorf("reboot %s: %w", serial, err)
	}
	return nil
}
