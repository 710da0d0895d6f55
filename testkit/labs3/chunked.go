package labs3

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// decodeChunked turns a PUT whose body is in the aws-chunked encoding
// (X-Amz-Content-Sha256: STREAMING-..., which minio-go sends over plain HTTP)
// into a plain one. gofakes3 decodes such bodies for a single PUT but stores
// multipart parts still framed, and keeps Content-Encoding: aws-chunked;
// decoding here gives every path the same, correct bytes.
func decodeChunked(r *http.Request) error {
	if r.Method != http.MethodPut || !strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		return nil
	}
	n, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("bad x-amz-decoded-content-length %q", r.Header.Get("X-Amz-Decoded-Content-Length"))
	}
	r.Body = &chunkedBody{r: bufio.NewReader(r.Body), c: r.Body}
	r.ContentLength = n
	r.Header.Set("Content-Length", strconv.FormatInt(n, 10))
	r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	r.Header.Del("X-Amz-Decoded-Content-Length")
	r.Header.Del("X-Amz-Trailer")
	var enc []string
	for _, e := range strings.Split(r.Header.Get("Content-Encoding"), ",") {
		if e = strings.TrimSpace(e); e != "" && e != "aws-chunked" {
			enc = append(enc, e)
		}
	}
	if len(enc) == 0 {
		r.Header.Del("Content-Encoding")
	} else {
		r.Header.Set("Content-Encoding", strings.Join(enc, ","))
	}
	return nil
}

// chunkedBody reads the data of an aws-chunked body: chunks of
// "<hex size>[;chunk-signature=...]\r\n<data>\r\n", ended by a chunk of size
// zero (and trailers, which are skipped).
type chunkedBody struct {
	r      *bufio.Reader
	c      io.Closer
	remain int64
	done   bool
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	for b.remain == 0 {
		if b.done {
			return 0, io.EOF
		}
		if err := b.next(); err != nil {
			return 0, err
		}
	}
	if int64(len(p)) > b.remain {
		p = p[:b.remain]
	}
	n, err := b.r.Read(p)
	b.remain -= int64(n)
	if b.remain == 0 && err == nil {
		err = b.crlf()
	}
	if errors.Is(err, io.EOF) && b.remain > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// next reads a chunk header.
func (b *chunkedBody) next() error {
	line, err := b.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("read chunk header: %w", noEOF(err))
	}
	size, _, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ";")
	n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("bad chunk header %q", line)
	}
	if n == 0 {
		b.done = true
		return nil
	}
	b.remain = n
	return nil
}

// crlf reads the line end after a chunk's data.
func (b *chunkedBody) crlf() error {
	var end [2]byte
	if _, err := io.ReadFull(b.r, end[:]); err != nil {
		return fmt.Errorf("read chunk end: %w", noEOF(err))
	}
	if end != [2]byte{'\r', '\n'} {
		return fmt.Errorf("bad chunk end %q", end[:])
	}
	return nil
}

func (b *chunkedBody) Close() error { return b.c.Close() }

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
