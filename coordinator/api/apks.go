package api

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// APKList is the reply of GET /api/v1/apks.
type APKList struct {
	APKs []jobstore.APKRecord `json:"apks"`
}

// APK content types POST /api/v1/apks accepts.
const (
	ContentTypeAPK    = "application/vnd.android.package-archive"
	contentTypeOctets = "application/octet-stream"
)

// apkIdle is the longest pause in an APK's body: the body may take as long
// as it needs while it keeps arriving (api.read_timeout bounds the other
// bodies as a whole).
const apkIdle = 30 * time.Second

// apkStore is the store with the APK table.
func (h *Handler) apkStore(w http.ResponseWriter, r *http.Request) (jobstore.APKStore, bool) {
	return optionalStore[jobstore.APKStore](h, w, r, "APKs")
}

// listAPKs is GET /api/v1/apks.
func (h *Handler) listAPKs(w http.ResponseWriter, r *http.Request, _ Caller) {
	as, ok := h.apkStore(w, r)
	if !ok {
		return
	}
	list, err := as.ListAPKs(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if list == nil {
		list = []jobstore.APKRecord{}
	}
	WriteJSON(w, http.StatusOK, APKList{APKs: list})
}

// addAPK is POST /api/v1/apks: the body is the APK, streamed to the
// bucket while hashed; the query declares its package and version
// (docs/api.md, APKs). One upload runs at a time; another meanwhile is
// answered 503 with Retry-After.
func (h *Handler) addAPK(w http.ResponseWriter, r *http.Request, c Caller) {
	bucket := h.opts.APKs
	if bucket == nil {
		WriteProblem(w, r, problem(http.StatusNotImplemented, ProblemNotImplemented, "", "this coordinator has no storage configured to keep APKs (storage section)"))
		return
	}
	as, ok := h.apkStore(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	decl := protocol.APK{SHA256: strings.Repeat("0", 64), Size: 1, Package: q.Get("package"), VersionName: q.Get("version_name")}
	if q.Get("package") == "" {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "package", "package: required: the APK's package name (such as com.example.shop)"))
		return
	}
	code, err := strconv.ParseInt(q.Get("version_code"), 10, 64)
	if err != nil {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "version_code", "version_code: required: the APK's versionCode, a whole number"))
		return
	}
	decl.VersionCode = code
	if err := decl.Validate(); err != nil {
		field, _ := splitField(err.Error())
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, field, "%s", err.Error()))
		return
	}
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); ct != ContentTypeAPK && ct != contentTypeOctets {
		WriteProblem(w, r, problem(http.StatusUnsupportedMediaType, ProblemUnsupported, "", "Content-Type %q: send the APK as %s", ct, ContentTypeAPK))
		return
	}
	limit := h.opts.MaxAPKBytes
	switch size := r.ContentLength; {
	case size < 0:
		WriteProblem(w, r, problem(http.StatusLengthRequired, ProblemInvalidRequest, "", "Content-Length required: the APK's size is checked before it is stored"))
		return
	case size > limit:
		WriteProblem(w, r, problem(http.StatusRequestEntityTooLarge, ProblemTooLarge, "", "an APK of %d bytes is larger than the limit of %d bytes", size, limit))
		return
	case size < 4:
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "body", "body: %d bytes is no APK", size))
		return
	}
	size := r.ContentLength
	body := bufio.NewReaderSize(&idleBody{r: http.MaxBytesReader(w, r.Body, size), rc: http.NewResponseController(w)}, 64<<10)
	// An APK is a zip file: its first bytes are a local file header.
	if magic, err := body.Peek(4); err != nil || !bytes.Equal(magic, []byte("PK\x03\x04")) {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "body", "body: not an APK (an APK is a zip file, starting with PK)"))
		return
	}
	select {
	case h.apkSlot <- struct{}{}:
		defer func() { <-h.apkSlot }()
	default:
		// Not waited for: the body's read deadline would pass meanwhile.
		w.Header().Set("Retry-After", "10")
		WriteProblem(w, r, problem(http.StatusServiceUnavailable, ProblemUnavailable, "", "another APK is being stored; retry after 10 s"))
		return
	}
	sum, err := bucket.PutAPK(r.Context(), body, size)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) || errors.Is(err, io.ErrUnexpectedEOF) || clientGone(r) {
			WriteProblem(w, r, problem(http.StatusBadRequest, ProblemInvalidRequest, "body", "body: the APK did not arrive whole (%d bytes announced)", size))
			return
		}
		h.log.Error().Err(err).Msg("api: store apk")
		WriteProblem(w, r, problem(http.StatusServiceUnavailable, ProblemUnavailable, "", "the APK could not be stored in the bucket; the coordinator's log has the cause"))
		return
	}
	decl.SHA256, decl.Size = sum, size
	rec, created, err := as.AddAPK(r.Context(), jobstore.APKRecord{APK: decl, AddedBy: c.Name})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	switch {
	case created:
		h.log.Info().Str("sha256", sum).Str("package", decl.Package).Int64("version_code", decl.VersionCode).Str("token", c.Name).Msg("apk added")
		WriteJSON(w, http.StatusCreated, rec)
	case rec.Package != decl.Package || rec.VersionCode != decl.VersionCode:
		WriteProblem(w, r, problem(http.StatusConflict, ProblemConflict, "version_code",
			"APK %s is stored already as %s versionCode %d: the same bytes are the same APK", sum, rec.Package, rec.VersionCode))
	default:
		WriteJSON(w, http.StatusOK, rec)
	}
}

// idleBody moves the connection's read deadline on while an APK's body
// keeps arriving (apkIdle), at most once a second.
type idleBody struct {
	r    io.Reader
	rc   *http.ResponseController
	last time.Time
}

func (b *idleBody) Read(p []byte) (int, error) {
	if now := time.Now(); now.Sub(b.last) >= time.Second {
		b.last = now
		_ = b.rc.SetReadDeadline(now.Add(apkIdle))
	}
	return b.r.Read(p)
}
