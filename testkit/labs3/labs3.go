package labs3

import (
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/edgeagent/edgeagent/uploader"
)

// Defaults of Options.
const (
	DefaultBucket    = "edgelab"
	DefaultAccessKey = "edgelab"
	DefaultSecretKey = "edgelab-secret"
	Region           = "us-east-1"
)

// Options configures Start; the zero value is ready to use.
type Options struct {
	// Addr is the listen address, 127.0.0.1:0 (a random loopback port) by
	// default.
	Addr string
	// Bucket is created empty; DefaultBucket by default.
	Bucket string
	// AccessKey and SecretKey are what clients should use. The server does
	// not check signatures.
	AccessKey string
	SecretKey string
}

// Server is a running in-process S3 server.
type Server struct {
	Endpoint  string // host:port, plain HTTP
	AccessKey string
	SecretKey string
	Region    string
	Bucket    string

	backend *s3mem.Backend
	http    *http.Server
	done    chan struct{}
	// writes serialises object writes (PUT, multipart start and completion)
	// with their If-None-Match checks.
	writes sync.Mutex

	closeOnce sync.Once
	closeErr  error
}

// Start starts a server and creates its bucket.
func Start(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Bucket == "" {
		opts.Bucket = DefaultBucket
	}
	if opts.AccessKey == "" {
		opts.AccessKey = DefaultAccessKey
	}
	if opts.SecretKey == "" {
		opts.SecretKey = DefaultSecretKey
	}
	backend := s3mem.New()
	if err := backend.CreateBucket(opts.Bucket); err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", opts.Bucket, err)
	}
	faker := gofakes3.New(backend, gofakes3.WithoutVersioning())

	l, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", opts.Addr, err)
	}
	s := &Server{
		Endpoint:  l.Addr().String(),
		AccessKey: opts.AccessKey,
		SecretKey: opts.SecretKey,
		Region:    Region,
		Bucket:    opts.Bucket,
		backend:   backend,
		done:      make(chan struct{}),
	}
	s.http = &http.Server{
		Handler:           s.conditional(faker.Server()),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(l)
	}()
	return s, nil
}

// UploaderOptions returns options for an uploader writing to the bucket.
func (s *Server) UploaderOptions() uploader.S3Options {
	return uploader.S3Options{
		Endpoint:  s.Endpoint,
		Region:    s.Region,
		Bucket:    s.Bucket,
		AccessKey: s.AccessKey,
		SecretKey: s.SecretKey,
	}
}

// Close stops the server, cutting open connections, and waits until it has
// stopped. The stored objects are gone afterwards.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if err := s.http.Close(); err != nil {
			s.closeErr = fmt.Errorf("close s3 server: %w", err)
		}
		<-s.done
	})
	return s.closeErr
}

// conditional enforces If-None-Match: * on every request that creates an
// object: a PUT, and the start and completion of a multipart upload. The
// check and the write happen under one lock, so two writers of a key cannot
// both pass. It also decodes aws-chunked bodies (see decodeChunked).
func (s *Server) conditional(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucket, key, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if !ok || bucket == "" || key == "" {
			next.ServeHTTP(w, r)
			return
		}
		if err := decodeChunked(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		q := r.URL.Query()
		_, initiate := q["uploads"]
		initiate = initiate && r.Method == http.MethodPost
		commit := (r.Method == http.MethodPut && !q.Has("uploadId")) ||
			(r.Method == http.MethodPost && q.Has("uploadId"))
		if !initiate && !commit {
			next.ServeHTTP(w, r)
			return
		}
		if commit {
			s.writes.Lock()
			defer s.writes.Unlock()
		}
		if r.Header.Get("If-None-Match") == "*" && s.exists(bucket, key) {
			preconditionFailed(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) exists(bucket, key string) bool {
	obj, err := s.backend.HeadObject(bucket, key)
	if err != nil {
		return false
	}
	if obj.Contents != nil {
		obj.Contents.Close()
	}
	return true
}

// s3Error is the XML body of an S3 error response.
type s3Error struct {
	XMLName  xml.Name `xml:"Error"`
	Code     string   `xml:"Code"`
	Message  string   `xml:"Message"`
	Resource string   `xml:"Resource"`
}

func preconditionFailed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusPreconditionFailed)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(s3Error{
		Code:     "PreconditionFailed",
		Message:  "At least one of the pre-conditions you specified did not hold",
		Resource: r.URL.Path,
	})
}
