//go:build linux

package store

import (
	"os"
	"syscall"
)

// datasync is the floor of a durable commit: fdatasync(2), what SQLite
// syncs its WAL with on Linux.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
