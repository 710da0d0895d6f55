// Package deps pins the project's chosen modules while the packages that use
// them are written. It is removed once every module has a real importer.
package deps

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/goccy/go-yaml"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/johannesboyne/gofakes3"
	_ "github.com/johannesboyne/gofakes3/backend/s3mem"
	_ "github.com/kardianos/service"
	_ "github.com/minio/minio-go/v7"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/micro"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/rs/zerolog"
	_ "go.uber.org/goleak"
	_ "modernc.org/sqlite"
)
