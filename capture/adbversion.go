package capture

import (
	"context"
	"fmt"
)

// ADBVersion returns the adb server's version as adb prints it ("1.0.41"):
// its host protocol version 41 is the last number.
func (d *ADBDevice) ADBVersion(ctx context.Context) (string, error) {
	v, err := d.c.Version(ctx)
	if err != nil {
		return "", fmt.Errorf("adb version: %w", err)
	}
	return fmt.Sprintf("1.0.%d", v), nil
}
