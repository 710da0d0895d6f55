package capture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/edgeagent/edgeagent/protocol"
)

// Content types of the artifacts this package produces.
const (
	ContentTypePNG    = "image/png"
	ContentTypeXML    = "application/xml"
	ContentTypeMP4    = "video/mp4"
	ContentTypeNDJSON = "application/x-ndjson"
)

// OpLogName is the artifact name of the operation log. No step capture can
// take it: capture names end in .png, .xml or .mp4.
const OpLogName = "oplog.jsonl"

// Artifact is one captured file. Its bytes are either in Data or, for
// recordings spooled to disk, in the file at Path (then Data is nil). The
// caller owns a Path file and removes it (Remove) once it is uploaded or
// dropped.
type Artifact struct {
	Name        string // object name, the last element of jobs/<job>/g<gen>/<name>
	ContentType string
	Size        int64
	SHA256      string // lowercase hex
	Data        []byte
	Path        string
}

// Open returns the artifact's bytes.
func (a Artifact) Open() (io.ReadCloser, error) {
	if a.Path != "" {
		f, err := os.Open(a.Path)
		if err != nil {
			return nil, fmt.Errorf("open artifact %s: %w", a.Name, err)
		}
		return f, nil
	}
	return io.NopCloser(bytes.NewReader(a.Data)), nil
}

// Remove deletes the artifact's file, if it has one.
func (a Artifact) Remove() error {
	if a.Path == "" {
		return nil
	}
	if err := os.Remove(a.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove artifact %s: %w", a.Name, err)
	}
	return nil
}

// NewArtifact returns an in-memory artifact with its size and SHA-256 set.
func NewArtifact(name, contentType string, data []byte) Artifact {
	sum := sha256.Sum256(data)
	return Artifact{Name: name, ContentType: contentType, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Data: data}
}

// artifactName returns name with ext appended unless it already ends with
// it, or "<prefix>-NNN<ext>" when name is empty, and checks the result.
func artifactName(name, prefix string, seq int, ext string) (string, error) {
	name = protocol.CaptureName(name, prefix, seq, ext)
	if err := protocol.ValidateArtifactName(name); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidStep, err)
	}
	return name, nil
}
