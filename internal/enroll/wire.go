package enroll

// Path is the route of the enrollment API.
const Path = "/api/v1/enroll"

// MaxBodyBytes bounds a request to Path.
const MaxBodyBytes = 4 << 10

// Request is the body of POST /api/v1/enroll: the code is the credential,
// the public key the agent's own NATS user nkey (its seed never leaves the
// PC).
type Request struct {
	Code      string `json:"code"`
	PublicKey string `json:"public_key"`
}

// Response is the answer to a redeemed code: what the agent's config and
// creds file are written from.
type Response struct {
	// AgentID is the name the operator enrolled.
	AgentID string `json:"agent_id"`
	// NATSURL is the server URL (or several, comma-separated) agents use.
	NATSURL string `json:"nats_url"`
	// UserJWT is the agent's NATS user JWT, bound to PublicKey and to the
	// agent's own subjects.
	UserJWT string `json:"user_jwt"`
	// StorageMode is always presigned: an enrolled PC holds no bucket key.
	StorageMode string `json:"storage_mode"`
	// UpdatePublicKey is the key agent releases are signed with, when the
	// coordinator has one; written to the agent config as
	// update.public_key.
	UpdatePublicKey string `json:"update_public_key,omitempty"`
}
