package main

import (
	"fmt"
	"io"
)

func toolsCmd(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "robot-bridge tools: not wired yet")
	return 1
}

func simCmd(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "robot-bridge sim: not wired yet")
	return 1
}
