package main

import (
	"fmt"
	"io"
)

// The command line's messages go through say, sayln and sayf. Their
// write errors are dropped on purpose: when stdout or stderr is gone (a
// closed pipe, a full disk) there is no one left to tell, and the exit
// code already reports how the command went.

func say(w io.Writer, a ...any) { _, _ = fmt.Fprint(w, a...) }

func sayln(w io.Writer, a ...any) { _, _ = fmt.Fprintln(w, a...) }

func sayf(w io.Writer, format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
