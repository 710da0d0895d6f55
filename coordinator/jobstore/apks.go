package jobstore

import (
	"context"
	"errors"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// ErrAPKNotFound: no APK with that SHA-256 is recorded.
var ErrAPKNotFound = errors.New("apk not found")

// APKRecord is an APK the operator stored (docs/api.md, APKs): its object
// is protocol.APKObjectKey(SHA256) in the coordinator's bucket.
type APKRecord struct {
	protocol.APK
	// AddedAt is when it was first recorded, by the database clock.
	AddedAt time.Time `json:"added_at"`
	// AddedBy is who added it: an API token's name, or "cli".
	AddedBy string `json:"added_by"`
}

// MaxAPKList bounds ListAPKs.
const MaxAPKList = 1000

// APKStore records the APKs install_app steps install. Stores implement it
// beside Store; the conformance suite (coordinator/storetest) checks both.
type APKStore interface {
	// AddAPK records a (AddedAt set by the database clock) and returns it
	// with created true. An APK with the same SHA-256 already recorded is
	// kept as it is and returned with created false: the same bytes are
	// the same APK, whatever a later add declares.
	AddAPK(ctx context.Context, a APKRecord) (rec APKRecord, created bool, err error)
	// GetAPK returns the APK with that SHA-256; ErrAPKNotFound otherwise.
	GetAPK(ctx context.Context, sha256 string) (APKRecord, error)
	// ListAPKs lists the recorded APKs newest first, at most MaxAPKList.
	ListAPKs(ctx context.Context) ([]APKRecord, error)
}
