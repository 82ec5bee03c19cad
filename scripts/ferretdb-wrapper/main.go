// Command ferretdb-wrapper runs an embedded FerretDB (MongoDB wire protocol)
// with the SQLite backend on a TCP address, until SIGTERM or SIGINT.
//
// It exists because the upstream `cmd/ferretdb` binary built with `go install`
// panics at start (its generated build/version/version.txt is not part of the
// module); the embeddable package has no such requirement.
//
// Usage:
//
//	ferretdb-wrapper -listen 127.0.0.1:27017 -dir /path/to/data
//	ferretdb-wrapper -version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// ferretDBVersion is the FerretDB module version pinned in go.mod; keep both in step.
const ferretDBVersion = "v1.24.0"

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on (host:port)")
	dir := flag.String("dir", "", "directory for the SQLite databases (required)")
	logLevel := flag.String("log-level", "info", "log level: debug, info, warn or error")
	version := flag.Bool("version", false, "print the embedded FerretDB version and exit")
	flag.Parse()

	if *version {
		fmt.Println("ferretdb-wrapper", ferretDBVersion, "sqlite")
		return
	}

	if err := run(*listen, *dir, *logLevel); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb-wrapper:", err)
		os.Exit(1)
	}
}

func run(listen, dir, logLevel string) error {
	if dir == "" {
		return errors.New("-dir is required")
	}
	if listen == "" {
		return errors.New("-listen must not be empty")
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("bad -log-level %q: %w", logLevel, err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: listen},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/", // the trailing slash marks a directory
	})
	if err != nil {
		return fmt.Errorf("ferretdb.New: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	logger.Info("starting", "listen", listen, "dir", abs, "ferretdb", ferretDBVersion)

	err = f.Run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run: %w", err)
	}

	logger.Info("stopped")

	return nil
}
