package uploader

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
)

// MetaSHA256 is the user metadata key (sent as x-amz-meta-sha256) holding the
// lowercase hex SHA-256 of an object's content.
const MetaSHA256 = "sha256"

// Sentinel errors callers branch on.
var (
	// ErrExists means the object key is taken by an object with other
	// content or other stamps; it was left unchanged.
	ErrExists = errors.New("object already exists")
	// ErrNotFound means no object has the key.
	ErrNotFound = errors.New("object not found")
	// ErrUnstamped means an object carries no valid fencing token metadata.
	ErrUnstamped = errors.New("object has no fencing stamps")
	// ErrChecksumMismatch means the body read did not hash to the SHA-256
	// the artifact declared; nothing was committed.
	ErrChecksumMismatch = errors.New("sha256 mismatch")
	// ErrSizeMismatch means the body read was not as long as the artifact
	// declared; nothing was committed.
	ErrSizeMismatch = errors.New("size mismatch")
	// ErrInvalid means the token, the artifact or the options are malformed.
	ErrInvalid = errors.New("invalid upload")
)

// Uploader puts one artifact of a job under the job's token.
type Uploader interface {
	Upload(ctx context.Context, tok fencing.Token, a Artifact) (Result, error)
}

// Lister reads artifacts back with the stamps they carry.
type Lister interface {
	Stat(ctx context.Context, key string) (Object, error)
	List(ctx context.Context, prefix string) ([]Object, error)
}

// Artifact is one file a job produced. Exactly one of Body and Path is set.
type Artifact struct {
	// Name is the last element of the object key; see
	// protocol.ValidateArtifactName.
	Name string
	// ContentType defaults to application/octet-stream.
	ContentType string
	// Body is read once, to EOF. It is not closed.
	Body io.Reader
	// Path names a local file to upload instead of Body.
	Path string
	// Size, when positive, is the declared length of the content; a body of
	// another length fails with ErrSizeMismatch. Zero or negative means
	// unknown.
	Size int64
	// SHA256, when set, is the hex SHA-256 of the content. It saves a
	// hashing pass (and, for a Body that cannot seek, a spool to disk); the
	// content is still checked against it before anything is committed.
	SHA256 string
}

// Result describes the object an upload left in storage.
type Result struct {
	Key    string
	Size   int64
	SHA256 string
	ETag   string
	// Existed is true when the object was already there with the same
	// content and stamps, so this call wrote nothing.
	Existed bool
}

// Object is a stored object with the stamps read back from its metadata.
type Object struct {
	Key          string
	Size         int64
	ETag         string
	ContentType  string
	LastModified time.Time
	// SHA256 is the x-amz-meta-sha256 value, "" when absent.
	SHA256 string
	// Token is read back with fencing.FromMetadata; it is the zero Token for
	// an object without valid stamps.
	Token fencing.Token
	// Metadata is the user metadata with lowercase keys and no
	// x-amz-meta- prefix.
	Metadata map[string]string
}
