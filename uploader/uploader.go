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
	// ErrUnavailable means the storage (or, in presigned mode, the
	// coordinator authorising the upload) could not be reached or kept
	// failing with server errors after every retry. Trying again later may
	// succeed; a resumable upload was left open for that.
	ErrUnavailable = errors.New("storage unavailable")
	// ErrTooLarge means the content is larger than the mode can store
	// (presigned mode: one PUT of at most 5 GiB).
	ErrTooLarge = errors.New("artifact too large")
)

// Uploader puts one artifact of a job under the job's token.
type Uploader interface {
	Upload(ctx context.Context, tok fencing.Token, a Artifact) (Result, error)
}

// Resumable is an Uploader whose multipart uploads can outlive a failed
// attempt, so that a later attempt continues from the parts already stored
// instead of sending everything again. The spool uses it for files it
// keeps between attempts.
type Resumable interface {
	Uploader
	// UploadResumable uploads a like Upload. When *mp names a multipart
	// upload of this key that is still open, it continues it: the parts
	// already stored are listed, checked and not sent again. Before it
	// starts a multipart upload it passes *mp with Opening set to save, and
	// once started, the upload's id, before the first part is sent, so that
	// the caller can record it: a record saved this way names every upload
	// a crash can leave open. When the attempt fails with ErrUnavailable the
	// upload is left open for a later call; on any other failure, and when
	// ctx is done, it is aborted and *mp is cleared (left set when the
	// abort failed, for the caller to Abandon later).
	UploadResumable(ctx context.Context, tok fencing.Token, a Artifact, mp *Multipart, save func(Multipart) error) (Result, error)
	// Abandon aborts every incomplete multipart upload of key, uploadID
	// (when set) first.
	Abandon(ctx context.Context, key, uploadID string) error
}

// Multipart is a multipart upload in progress, as its caller records it.
type Multipart struct {
	UploadID string `json:"upload_id,omitempty"`
	PartSize int64  `json:"part_size,omitempty"`
	// Opening is set while a request starting a multipart upload of the
	// key may have reached the storage without its answer: an upload may
	// be open that only Abandon's listing of the key finds.
	Opening bool `json:"opening,omitempty"`
}

// Open reports whether a multipart upload may be open in storage.
func (m Multipart) Open() bool { return m.UploadID != "" || m.Opening }

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
	// Hashed says that SHA256 was computed from the bytes as they were
	// written to Path, by the writer of the file (a capture streamed from
	// the phone into the spool directory), which does not write to it any
	// more. Put and Upload then take SHA256 as the content's without
	// reading the file a second time to hash it (docs/uploads.md, Hashing):
	// the storage still checks a single PUT's content against it and each
	// part of a multipart upload against the part's own hash. Ignored
	// without Path or SHA256.
	Hashed bool
	// Progress, when set, is called as content is sent with the bytes
	// stored or in flight so far. The count goes back when a failed
	// request's bytes are taken back. It is called from the goroutines
	// sending parts, so it must be quick and safe for concurrent use.
	Progress func(sent int64)

	// hashed is set by the spool for a file it hashed to SHA256 while
	// writing it: the content is not hashed again.
	hashed bool
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
